"""Kernels that nbval and nbclient start under pytest talk over Unix sockets of their own
(scripts/kernel_sockets.py, installed by conftest.py): no TCP port two kernels could share."""

import os

import nbformat
import pytest
from nbclient import NotebookClient

# both tests start kernels: `make integration` (CI, after `make test`; issue 39); `make test`'s
# own nbval kernels use these sockets, and would fail to start without them
pytestmark = pytest.mark.integration


def test_nbval_kernels_use_unix_sockets_in_a_folder_of_their_own(tmp_path):
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, start_new_kernel
    started = [start_new_kernel(kernel_name=CURRENT_ENV_KERNEL_NAME, cwd=str(tmp_path)) for _ in range(2)]
    try:
        infos = [km.get_connection_info() for km, _ in started]
        assert [i["transport"] for i in infos] == ["ipc", "ipc"]
        assert all(os.path.isabs(i["ip"]) for i in infos) and infos[0]["ip"] != infos[1]["ip"]
        for km, kc in started:   # each answers, though it runs in another folder than this process
            reply = kc.execute_interactive("import os; x = os.getcwd()", user_expressions={"x": "x"},
                                           timeout=60)
            assert reply["content"]["user_expressions"]["x"]["data"]["text/plain"] == repr(str(tmp_path))
    finally:
        for km, kc in started:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def test_nbclient_kernels_use_unix_sockets():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    client = NotebookClient(nb, timeout=60, kernel_name="python3")
    client.execute()
    assert nb.cells[0].outputs[0]["text"] == "42\n"
    manager = client.kernel_manager_class()   # the class nbclient started the kernel with
    assert type(manager).__name__ == "UnixSocketAsyncKernelManager" and manager.transport == "ipc"
