"""The HTTP library under the installed ``openai`` SDK: ``httpx2`` for openai 3, ``httpx`` for openai 2.

The model client hands the SDK its HTTP client, asks it for the raw streamed response (``cast_to`` the
library's ``Response``) and catches the library's errors; all of them must be the types of the library the
SDK was built on, or the SDK returns its own stream object and the errors are never caught. The two
libraries have the same API, so the rest of the harness names only ``http`` from here. openai 3 is what
commitbench installs; openai 2 is supported so that commitbench can share a virtual environment with a
package pinned to it (the ``verifiers`` environments of docs/rl.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import openai

__all__ = ["OPENAI_MAJOR", "http"]

OPENAI_MAJOR = int(openai.__version__.split(".", 1)[0])

if TYPE_CHECKING or OPENAI_MAJOR >= 3:
    import httpx2 as http
else:  # pragma: no cover - exercised in the verifiers venv of CI
    import httpx as http
