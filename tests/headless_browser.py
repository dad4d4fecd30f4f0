"""A real headless browser for the report tests: Chromium, as Qt WebEngine ships it in the PyPI
wheels of PyQt6-WebEngine (``pip install 'fabricemu[browser]'``; no download of its own, no root).

Run as a script, in its own process (Qt wants its main thread, and a crash must not take pytest
with it):

    python tests/headless_browser.py --check
        prints "ok" and exits 0 when the browser starts and runs a script, else prints why not and
        exits 1.
    python tests/headless_browser.py PAGE.html SHOT.png [--follow N]
        loads the page, waits until it has loaded and every inline SVG plot has a size, takes a
        screenshot of the whole page (PNG) and prints JSON: the console messages (level, text,
        line), what the page shows (see PROBE) and, with --follow, the same for the pages of the
        first N links of class ``run-report`` (the browser resolves and loads each).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

# Offscreen rendering, no GPU, no sandbox (which needs user namespaces, and refuses root).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QTWEBENGINE_DISABLE_SANDBOX", "1")
os.environ.setdefault(
    "QTWEBENGINE_CHROMIUM_FLAGS", "--disable-gpu --no-sandbox --disable-dev-shm-usage --log-level=3"
)
os.environ.setdefault("QT_LOGGING_RULES", "*.debug=false;qt.qpa.*=false;qt.webenginecontext=false")

#: What the page shows, collected in the page by the browser's own DOM (JSON).
PROBE = r"""
(() => {
  const rect = (e) => { const r = e.getBoundingClientRect();
                        return {left: r.left, top: r.top, width: r.width, height: r.height}; };
  const figures = [...document.querySelectorAll("figure")].map((f) => {
    const svg = f.querySelector("svg");
    return {
      plot: f.dataset.plot || null,
      time: f.classList.contains("time"),
      section: (() => { let e = f; while (e && e.tagName !== "H2") e = e.previousElementSibling;
                        return e ? e.textContent : null; })(),
      svg: svg ? rect(svg) : null,
      paths: svg ? svg.querySelectorAll("path, image, use").length : 0,
      texts: svg ? [...svg.querySelectorAll("text")].map((t) => t.textContent) : [],
      time_axes: [...f.querySelectorAll(".fx-time-axes")].map(rect),
      yx_lines: [...f.querySelectorAll(".fx-yx-line path")].map((p) => {
        const r = rect(p); const n = p.getTotalLength ? p.getTotalLength() : 0;
        const a = p.getPointAtLength ? p.getPointAtLength(0) : {x: 0, y: 0};
        const b = p.getPointAtLength ? p.getPointAtLength(n) : {x: 0, y: 0};
        return {rect: r, start: [a.x, a.y], end: [b.x, b.y]}; }),
      caption: (f.querySelector("figcaption") || {}).textContent || "",
    };
  });
  // Sections: each h2 and the elements up to the next one.
  const sections = [...document.querySelectorAll("h2")].map((h) => {
    let plots = 0, tables = 0, notes = [];
    for (let e = h.nextElementSibling; e && e.tagName !== "H2"; e = e.nextElementSibling) {
      if (e.tagName === "FIGURE") plots += 1;
      if (e.tagName === "TABLE") tables += 1;
      if (e.classList.contains("note")) notes.push(e.textContent);
    }
    return {title: h.textContent, plots, tables, notes};
  });
  const tables = [...document.querySelectorAll("table")].map((t) =>
    [...t.querySelectorAll("tr")].map((r) => [...r.children].map((c) => c.textContent)));
  const links = [...document.querySelectorAll("a.run-report")].map((a) => ({href: a.href,
                                                                          text: a.textContent}));
  return JSON.stringify({title: document.title, h1: (document.querySelector("h1") || {}).textContent,
                         sections, figures, tables, links,
                         scripts: document.querySelectorAll("script").length,
                         height: document.documentElement.scrollHeight,
                         width: document.documentElement.scrollWidth});
})()
"""

#: True once every inline SVG plot has been laid out with a size.
READY = r"""
(() => document.readyState === "complete" &&
  [...document.querySelectorAll("figure svg")].every((s) => {
    const r = s.getBoundingClientRect(); return r.width > 0 && r.height > 0; }))()
"""


class Browser:
    def __init__(self) -> None:
        from PyQt6.QtWebEngineCore import QWebEnginePage
        from PyQt6.QtWebEngineWidgets import QWebEngineView
        from PyQt6.QtWidgets import QApplication

        self.app = QApplication.instance() or QApplication([sys.argv[0]])
        self.console: List[Dict[str, Any]] = []
        console = self.console

        class Page(QWebEnginePage):
            def javaScriptConsoleMessage(self, level: Any, message: str, line: int, source: str) -> None:
                console.append(
                    {
                        "level": getattr(level, "name", str(level)),
                        "text": message,
                        "line": line,
                        "source": source,
                    }
                )

        self.view = QWebEngineView()
        self.page = Page(self.view)
        self.view.setPage(self.page)
        self.view.resize(1200, 900)
        self.view.show()

    def wait(self, ms: int) -> None:
        from PyQt6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        QTimer.singleShot(ms, loop.quit)
        loop.exec()

    def load(self, url: Any, timeout_ms: int = 60_000) -> bool:
        from PyQt6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        done: List[bool] = []

        def finished(ok: bool) -> None:
            done.append(ok)
            loop.quit()

        self.page.loadFinished.connect(finished)
        self.view.load(url)
        QTimer.singleShot(timeout_ms, loop.quit)
        loop.exec()
        self.page.loadFinished.disconnect(finished)
        return bool(done and done[0])

    def js(self, script: str, timeout_ms: int = 30_000) -> Any:
        from PyQt6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        out: List[Any] = []

        def got(value: Any) -> None:
            out.append(value)
            loop.quit()

        self.page.runJavaScript(script, 0, got)
        QTimer.singleShot(timeout_ms, loop.quit)
        loop.exec()
        if not out:
            raise TimeoutError("the page did not answer a script")
        return out[0]

    def settle(self, timeout_ms: int = 30_000) -> bool:
        """Wait until the page says its plots have a size."""
        waited = 0
        while waited < timeout_ms:
            if self.js(READY):
                return True
            self.wait(100)
            waited += 100
        return False

    def visit(self, url: Any) -> Dict[str, Any]:
        start = len(self.console)
        loaded = self.load(url)
        ready = self.settle() if loaded else False
        facts = json.loads(self.js(PROBE)) if loaded else {}
        return {
            "url": url.toString(),
            "loaded": loaded,
            "ready": ready,
            "console": self.console[start:],
            **facts,
        }

    def fresh_frame(self, previous: Any, timeout_ms: int = 5000) -> Any:
        """The view once the page has painted after a scroll: two animation frames, then grabs
        until two in a row agree and differ from the ``previous`` tile (a stale frame would repeat
        it; a page whose tiles look alike is accepted at the timeout)."""
        self.js(
            "window.__fxPainted = false; requestAnimationFrame(() => requestAnimationFrame(() =>"
            " { window.__fxPainted = true; })); 0"
        )
        waited = 0
        while waited < timeout_ms and not self.js("window.__fxPainted === true"):
            self.wait(50)
            waited += 50
        last = self.view.grab()
        while waited < timeout_ms:
            self.wait(150)
            waited += 150
            shot = self.view.grab()
            image = shot.toImage()
            if image == last.toImage() and (previous is None or image != previous):
                return shot
            last = shot
        return last

    def screenshot(self, path: str, height: int) -> List[int]:
        """The whole page (up to 20,000 pixels high) as a PNG: the viewport scrolled down the
        page, each view painted into one image."""
        from PyQt6.QtGui import QPainter, QPixmap

        # No scroll bars in the picture (the page's own styles are left alone otherwise).
        self.js(
            "(() => { const s = document.createElement('style'); s.id = 'fx-shot';"
            " s.textContent = '::-webkit-scrollbar { display: none; }'; document.head.appendChild(s);"
            " return 0; })()"
        )
        view_h = int(self.js("window.innerHeight"))
        total = max(view_h, min(int(self.js("document.documentElement.scrollHeight")), 20_000))
        width = self.view.width()
        out = QPixmap(width, total)
        painter = QPainter(out)
        previous = None
        try:
            y = 0
            while y < total:
                # Where the page really scrolled to (it stops at its end).
                top = round(float(self.js(f"window.scrollTo(0, {min(y, total - view_h)}); window.scrollY")))
                tile = self.fresh_frame(previous)
                painter.drawPixmap(0, top, tile)
                previous = tile.toImage()
                y += view_h
        finally:
            painter.end()
        self.js("window.scrollTo(0, 0); document.getElementById('fx-shot').remove(); 0")
        if not out.save(path, "PNG"):
            raise OSError(f"could not write {path}")
        return [out.width(), out.height()]


def main(argv: List[str]) -> int:
    if argv[:1] == ["--check"]:
        try:
            from PyQt6.QtCore import QUrl

            b = Browser()
            ok = b.load(QUrl("data:text/html,<p id=x>ok</p>"))
            text = b.js("document.getElementById('x').textContent") if ok else None
        except Exception as e:
            print(f"{type(e).__name__}: {e}")
            return 1
        if text != "ok":
            print(f"the browser started but did not render a page (got {text!r})")
            return 1
        print("ok")
        return 0
    from PyQt6.QtCore import QUrl

    page, shot = argv[0], argv[1]
    follow = int(argv[argv.index("--follow") + 1]) if "--follow" in argv else 0
    b = Browser()
    first = b.visit(QUrl.fromLocalFile(os.path.abspath(page)))
    first["screenshot"] = b.screenshot(shot, first.get("height", 900)) if first["loaded"] else None
    followed = []
    for i, link in enumerate(first.get("links", [])[:follow]):
        visit = b.visit(QUrl(link["href"]))
        if visit["loaded"]:
            base, _ = os.path.splitext(shot)
            visit["screenshot"] = b.screenshot(f"{base}-link{i}.png", visit.get("height", 900))
        followed.append(visit)
    first["followed"] = followed
    print(json.dumps(first))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
