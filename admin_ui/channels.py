"""Channels (admins only): the channel connections, each bound to an agent — list with status, add
one per kind, edit, disable, verify again, delete, and the webhook URL to paste at the vendor.

Credentials are write-only here as everywhere: the pages show them masked, an empty field in the
edit form keeps what is stored. Outcomes are shown from a fixed list (``?done=`` names one), never
echoed from the URL.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from admin_ui.public_url import GUIDE, reachable_by_vendors
from admin_ui.render import page
from admin_ui.security import PREFIX, Signed, admin_only, check_csrf
from gateway.connections.model import KINDS, META_KINDS, OPTIONAL, REQUIRED, SECRET_FIELDS
from gateway.connections.service import Connections
from gateway.core.errors import GatewayError

router = APIRouter(prefix=f"{PREFIX}/channels")

LABELS = {"telegram": "Telegram bot", "slack": "Slack app", "twilio_sms": "Twilio SMS number",
          "twilio_voice": "Twilio voice number", "whatsapp": "WhatsApp (Twilio) sender",
          "whatsapp_cloud": "WhatsApp Cloud API number (Meta)", "messenger": "Facebook Messenger page",
          "instagram": "Instagram account", "teams": "Microsoft Teams bot (Azure bot registration)"}
FIELD_LABELS = {"bot_token": "Bot token", "signing_secret": "Signing secret", "account_sid": "Account SID",
                "auth_token": "Auth token", "phone_number": "Phone number (+1…)", "sender": "Sender (whatsapp:+1…)",
                "access_token": "Access token", "page_access_token": "Page access token", "app_secret": "App secret",
                "phone_number_id": "Phone number ID", "page_id": "Page ID", "ig_user_id": "Instagram account ID",
                "verify_token": "Webhook verify token (optional: made for you when empty)",
                "waba_id": "WhatsApp Business Account ID (optional: lists your message templates)",
                "app_id": "Microsoft App ID", "app_password": "Client secret (app password)",
                "tenant_id": "Tenant ID (optional: only for a single-tenant bot)"}
DONE = {"added": "Connection added.", "saved": "Changes saved.", "verified": "Verified again.",
        "enabled": "Connection enabled.", "disabled": "Connection disabled: its webhook answers 404.",
        "deleted": "Connection deleted."}
CHECK_FAILED = "check_failed"  # enable / verify again left it disabled: the page says why, as an error


def _connections(signed: Signed) -> Connections:
    assert signed.services.connections is not None
    return signed.services.connections


async def _agents(signed: Signed) -> list:
    """The agents a connection may answer as, besides the channels' own (the form's first, empty choice)."""
    assert signed.services.agents is not None
    channels_agent = signed.services.settings.agent_id
    return [a for a in await signed.services.agents.list() if a.id != channels_agent]


def _url_note(url: str) -> dict:
    return {"local_url": None if reachable_by_vendors(url) else url, "guide": GUIDE}


def _fields(kind: str) -> tuple[str, ...]:
    return REQUIRED.get(kind, ()) + OPTIONAL.get(kind, ())


def _form_fields() -> dict:
    """kind -> its credential fields as (name, label, secret, required)."""
    return {kind: [(name, FIELD_LABELS[name], name in SECRET_FIELDS, name in REQUIRED[kind]) for name in _fields(kind)]
            for kind in KINDS}


async def _list(request: Request, signed: Signed, status_code: int = 200, **context) -> Response:
    url = signed.services.settings.public_url
    return page(request, "channels.html", signed, status_code,
                connections=[c.public(url) for c in await _connections(signed).list()],
                agents=await _agents(signed), kinds=KINDS, labels=LABELS, fields=_form_fields(),
                key_ready=_connections(signed).store.box.ready, key_file=_connections(signed).store.box.generated_file,
                keys=await _connections(signed).store.check_keys(), **_url_note(url), **context)


@router.get("")
async def channels(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    return await _list(request, signed, outcome=DONE.get(request.query_params.get("done", "")))


@router.post("")
async def add(request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    kind = str(form.get("kind", ""))
    data = {"kind": kind, "name": str(form.get("name", "")).strip(), "agent": str(form.get("agent", "")) or None,
            "credentials": {name: str(form.get(name, "")) for name in _fields(kind)
                            if name in REQUIRED.get(kind, ()) or str(form.get(name, "")).strip()}}
    try:
        connection = await _connections(signed).create(data)
    except GatewayError as exc:  # shown next to the form; what was typed is kept, secrets are not
        typed = {"kind": kind, "name": data["name"], "agent": data["agent"] or "",
                 **{k: v for k, v in data["credentials"].items() if k not in SECRET_FIELDS}}
        return await _list(request, signed, 422, error=exc.message, typed=typed)
    done = "added" if connection.enabled else CHECK_FAILED
    return RedirectResponse(f"{PREFIX}/channels/{connection.id}?done={done}", status_code=303)


@router.get("/{connection_id}")
async def detail(connection_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    return await _detail(connection_id, request, signed)


async def _detail(connection_id: str, request: Request, signed: Signed, status_code: int = 200,
                  error: str | None = None) -> Response:
    connection = await _connections(signed).get(connection_id)
    url = signed.services.settings.public_url
    shown = connection.public(url)
    done = request.query_params.get("done", "")
    if error is None and done == CHECK_FAILED and shown["state"] == "check_failed":
        error = shown["state_message"]
    return page(request, "channel.html", signed, status_code, c=shown, meta=connection.kind in META_KINDS,
                agents=await _agents(signed), labels=LABELS, fields=_form_fields()[connection.kind],
                outcome=DONE.get(done), error=error, **_url_note(url))


@router.post("/{connection_id}")
async def change(connection_id: str, request: Request, signed: Signed = Depends(admin_only)) -> Response:
    await check_csrf(request, signed)
    form = await request.form()
    action = str(form.get("action", ""))
    connections = _connections(signed)
    try:
        if action == "save":
            current = await connections.get(connection_id)
            credentials = {name: str(form.get(name, "")) for name in _fields(current.kind)
                           if str(form.get(name, "")).strip()}  # an empty field keeps what is stored
            await connections.update(connection_id, {"name": str(form.get("name", "")).strip(),
                                                     "agent": str(form.get("agent", "")) or None,
                                                     **({"credentials": credentials} if credentials else {})})
            done = "saved"
        elif action in ("enable", "disable"):
            changed = await connections.update(connection_id, {"enabled": action == "enable"})
            done = f"{action}d" if changed.enabled == (action == "enable") else CHECK_FAILED
        elif action == "verify":
            checked = await connections.verify_again(connection_id)
            done = "verified" if checked.enabled else CHECK_FAILED
        elif action == "delete":
            await connections.delete(connection_id)
            return RedirectResponse(f"{PREFIX}/channels?done=deleted", status_code=303)
        else:
            return await _detail(connection_id, request, signed, 422, f"unknown action {action!r}")
    except GatewayError as exc:
        return await _detail(connection_id, request, signed, 422, exc.message)
    return RedirectResponse(f"{PREFIX}/channels/{connection_id}?done={done}", status_code=303)
