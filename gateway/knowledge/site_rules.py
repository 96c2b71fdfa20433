"""What a site says about crawling it: robots.txt (through the standard library's parser) and
the page URLs its sitemap lists (parsed with defusedxml, so a hostile sitemap cannot expand)."""

from __future__ import annotations

from urllib.robotparser import RobotFileParser

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

_SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


class RobotsRules:
    def __init__(self, text: str | None, user_agent: str) -> None:
        """``text`` None: the site has no robots.txt, and everything may be fetched."""
        self._agent = user_agent
        self._parser = RobotFileParser()
        self._parser.parse((text or "").splitlines())

    def allows(self, url: str) -> bool:
        return self._parser.can_fetch(self._agent, url)

    def crawl_delay(self) -> float | None:
        delay = self._parser.crawl_delay(self._agent)
        return float(delay) if delay is not None else None

    def sitemaps(self) -> list[str]:
        return list(self._parser.site_maps() or [])


def sitemap_locations(body: bytes) -> tuple[list[str], list[str]]:
    """(page URLs, nested sitemap URLs) listed by a sitemap or sitemap index; ([], []) when unreadable."""
    try:
        root = ElementTree.fromstring(body)
    except (ElementTree.ParseError, DefusedXmlException, ValueError):
        return [], []
    tag = root.tag.removeprefix(_SITEMAP_NS)
    locations = [
        (loc.text or "").strip()
        for loc in root.iter()
        if loc.tag.removeprefix(_SITEMAP_NS) == "loc" and (loc.text or "").strip()
    ]
    return ([], locations) if tag == "sitemapindex" else (locations, [])
