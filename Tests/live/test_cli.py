"""The server's command line: help, and refusing unsafe configurations."""
import subprocess

from conftest import SERVER


def test_help_documents_every_flag():
    out = subprocess.run([SERVER, "--help"], capture_output=True, text=True, timeout=10).stdout
    for flag in ["--host", "--port", "--rules", "--auth", "--insecure", "--default-namespace",
                 "--max-message-bytes", "--ping-interval", "--idle-timeout", "--rx-buffer", "--log-level"]:
        assert flag in out, flag


def test_emulator_auth_is_refused_on_a_public_address():
    result = subprocess.run([SERVER, "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=10)
    assert result.returncode != 0
    assert "--insecure" in result.stderr


def test_a_port_in_use_is_a_clear_error(open_server):
    result = subprocess.run([SERVER, "--port", str(open_server.port), "--rules", "open"],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode != 0
    assert "could not listen" in result.stderr


def test_sigterm_closes_clients_with_going_away_and_exits_cleanly():
    import websocket
    from conftest import Server
    server = Server("--rules", "open")
    client = server.client()
    server.proc.terminate()
    client.ws.settimeout(5)
    opcode, data = client.ws.recv_data(control_frame=True)
    assert opcode == websocket.ABNF.OPCODE_CLOSE
    assert int.from_bytes(data[:2], "big") == 1001
    assert server.proc.wait(timeout=10) == 0
