"""The empty-commitment suite: setups, request set, doability and the tools' persistence facts."""
