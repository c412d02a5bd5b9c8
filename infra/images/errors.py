"""The one error of the image builds: a one-line message saying what failed and where to look."""

from __future__ import annotations


class ImagesError(RuntimeError):
    pass


_WORDS = ("error", "failed", "fatal", "denied", "unable", "not found")


def _is_error(line: str) -> bool:
    lowered = line.lower()
    return line.startswith("E: ") or any(word in lowered for word in _WORDS)


def last_line(output: str) -> str:
    """The last meaningful line of a tool's output (errors come last). For podman's own
    "building at STEP ..." summary, the cause printed before it comes first."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for i in range(len(lines) - 1, -1, -1):
        if not _is_error(lines[i]):
            continue
        if "building at STEP" in lines[i]:
            causes = [line for line in lines[:i] if _is_error(line)]
            if causes:
                return f"{causes[-1]} ({lines[i].removeprefix('Error: ')})"
        return lines[i]
    return lines[-1] if lines else "no output"
