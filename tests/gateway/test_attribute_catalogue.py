"""Every attribute spec the gateway declares is listed in the one catalogue, whatever was imported."""

from __future__ import annotations

import importlib
import pkgutil

import gateway
from gateway.catalogue import CUSTOMER_ATTRIBUTES, PERSONA_ATTRIBUTES
from gateway.conversation.attributes import AttributeSpec


def _declared() -> dict[str, AttributeSpec]:
    found = {}
    for info in pkgutil.walk_packages(gateway.__path__, "gateway."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, AttributeSpec):
                found[value.name] = value
    return found


def test_the_catalogue_lists_every_declared_attribute():
    listed = {**PERSONA_ATTRIBUTES, **CUSTOMER_ATTRIBUTES}
    assert set(_declared()) == set(listed)
    assert not set(PERSONA_ATTRIBUTES) & set(CUSTOMER_ATTRIBUTES)
