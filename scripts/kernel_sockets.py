"""Notebook kernels over Unix sockets instead of TCP ports, for every tool here that starts
kernels side by side (nbval and nbclient under pytest-xdist, the smoke run's parallel kernels).

Why: jupyter_client picks a kernel's five TCP ports by probing for free ones and writes them to
the connection file; the kernel binds them only later. Two processes starting kernels at the
same moment can pick the same port, and one kernel dies at start ("Kernel died before replying
to kernel_info", jupyter/jupyter_client#154). Seen twice on 2026-11-25: every cell of 01 under
nbval with two workers, and 06 of eight smoke kernels on a GPU machine. With the ``ipc``
transport each kernel's sockets are files under a folder of this process's own, so no two
kernels can meet.

Usage: ``kernel_sockets.use_unix_sockets()`` once, before kernels start (tests/conftest.py).
"""

from __future__ import annotations

import os
import tempfile
import uuid

_FOLDER: str | None = None


def socket_base() -> str:
    """A fresh absolute path prefix for one kernel's socket files (the kernel adds ``-<n>``)."""
    global _FOLDER
    if _FOLDER is None:
        _FOLDER = tempfile.mkdtemp(prefix="course-kernels-")
    return os.path.join(_FOLDER, uuid.uuid4().hex[:12])


def _with_unix_sockets(base: type) -> type:
    class UnixSocketKernelManager(base):
        def __init__(self, **kwargs):
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault("ip", socket_base())   # absolute: the kernel may run in another folder
            super().__init__(**kwargs)
    UnixSocketKernelManager.__name__ = UnixSocketKernelManager.__qualname__ = f"UnixSocket{base.__name__}"
    return UnixSocketKernelManager


def use_unix_sockets() -> None:
    """Make nbval's and nbclient's kernels (in this process) use Unix sockets."""
    import jupyter_client
    if getattr(jupyter_client.AsyncKernelManager, "_course_unix_sockets", False):
        return
    sync_cls = _with_unix_sockets(jupyter_client.KernelManager)
    async_cls = _with_unix_sockets(jupyter_client.AsyncKernelManager)
    sync_cls._course_unix_sockets = async_cls._course_unix_sockets = True
    jupyter_client.AsyncKernelManager = async_cls   # nbclient looks it up here when it starts a kernel
    try:
        import nbval.kernel
    except ImportError:   # nbval is only needed by make test
        return
    nbval.kernel.KernelManager = sync_cls
