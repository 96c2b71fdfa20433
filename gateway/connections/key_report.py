"""Where every connection's credentials stand against the configured keys: what key rotation did, and
whether an older key can be removed (``switchboard connections check-keys``, the Channels screen)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KeyReport", "RecordKey"]


@dataclass(frozen=True)
class RecordKey:
    connection_id: str
    kind: str  # "" when the record itself cannot be read
    key: int | None  # position of the first configured key that opens it (0: the newest); None: none does
    sealed: bool = True  # False: the connection stores no credentials and needs no key
    reason: str = ""  # why no key opens it

    @property
    def unreadable(self) -> bool:
        return self.sealed and self.key is None

    @property
    def needs_older_key(self) -> bool:
        return self.sealed and self.key is not None and self.key > 0

    def line(self) -> str:
        who = f"{self.connection_id} ({self.kind})" if self.kind else self.connection_id
        if not self.sealed:
            return f"{who}: no credentials stored"
        if self.key is None:
            return f"{who}: UNREADABLE: {self.reason}"
        if self.key == 0:
            return f"{who}: opens with key 1 (the newest)"
        return f"{who}: opens only with key {self.key + 1} (an older one): it still needs that key"


@dataclass(frozen=True)
class KeyReport:
    records: tuple[RecordKey, ...]
    resealed: tuple[str, ...] = ()  # connection ids re-encrypted under the newest key by this run

    @property
    def unreadable(self) -> list[RecordKey]:
        return [r for r in self.records if r.unreadable]

    @property
    def needs_older_key(self) -> list[RecordKey]:
        return [r for r in self.records if r.needs_older_key]

    @property
    def older_keys_removable(self) -> bool:
        """Every stored credential opens with the newest key alone."""
        return not self.unreadable and not self.needs_older_key

    def summary(self) -> str:
        newest = sum(1 for r in self.records if r.sealed and r.key == 0)
        parts = [f"{len(self.records)} connection(s): {newest} under the newest key"]
        if self.needs_older_key:
            parts.append(f"{len(self.needs_older_key)} only under an older key")
        if self.unreadable:
            parts.append(f"{len(self.unreadable)} that no configured key opens")
        text = ", ".join(parts) + "."
        if self.older_keys_removable:
            return text + " No connection needs an older key: older keys can be removed."
        if self.needs_older_key:
            text += (f" Removing the older keys now would leave {len(self.needs_older_key) + len(self.unreadable)} "
                     "connection(s) unreadable: restart the gateway or run `switchboard connections rotate-keys` "
                     "first.")
        if self.unreadable:
            text += (" Unreadable connections need the key that sealed them put back in SWITCHBOARD_SECRET_KEY, "
                     "or their credentials entered again.")
        return text
