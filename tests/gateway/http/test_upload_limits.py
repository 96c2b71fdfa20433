"""One upload limit, exact to the byte, for the API and the console's form (SWITCHBOARD_MAX_UPLOAD_MB)."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from gateway.http.app import create_app
from tests.admin_ui.conftest import PASSWORD, csrf_of, sign_in
from tests.fakes.live_server import LiveServer

ADMIN = {"Authorization": "Bearer admin-secret"}
MIB = 1024 * 1024


def test_the_api_and_the_console_take_files_up_to_the_same_exact_limit(settings):
    configured = settings.model_copy(update={"max_upload_mb": 1, "max_body_bytes": 64 * 1024, "admin_user": "root",
                                             "admin_password": SecretStr(PASSWORD)})
    blank = b" " * MIB  # exactly the limit: read, then failed for having no text (quick)
    with LiveServer(create_app(configured)) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        over = client.post("/api/kb/documents", headers=ADMIN, files={"file": ("big.txt", blank + b" ")})
        assert over.status_code == 413 and over.json()["message"] == (
            f"file: big.txt is {MIB + 1} bytes; the limit is {MIB} bytes (SWITCHBOARD_MAX_UPLOAD_MB=1)")
        preview = client.post("/api/kb/documents/preview", headers=ADMIN, files={"file": ("big.txt", blank + b" ")})
        assert preview.status_code == 413
        at_limit = client.post("/api/kb/documents", headers=ADMIN, files={"file": ("blank.txt", blank)})
        assert at_limit.status_code == 422 and at_limit.json()["documents"][0]["document"]["status"] == "failed"
        assert [d["name"] for d in client.get("/api/kb/documents", headers=ADMIN).json()["documents"]] == [
            "blank.txt"]

        sign_in(client)
        page = client.get("/admin/knowledge")
        assert "up to 1 MB each" in page.text
        text = ("Tandems cost fifty euros a day. " * 3200).encode()  # ~100 KB: over the 64 KiB body limit
        def upload(name: str, data: bytes) -> httpx.Response:
            return client.post("/admin/knowledge/upload", headers={"accept": "application/json"},
                               data={"csrf_token": csrf_of(page.text), "kb": "main"}, files=[("files", (name, data))])

        taken = upload("tandems.txt", text)
        assert taken.status_code == 200, taken.text
        assert [row[:2] for row in taken.json()["rows"]] == [["tandems.txt", "ready"]]
        refused = upload("big.txt", blank + b" ")
        assert refused.status_code == 422
        [(name, status, why)] = refused.json()["rows"]
        assert (name, status) == ("big.txt", "refused") and f"the limit is {MIB} bytes" in why
