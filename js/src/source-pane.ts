/**
 * The source pane: a step's trace source, one element per line, made only where it is seen.
 *
 * A 12-layer GPT-2's steps have ~2,000 lines each; making all their elements on every step switch
 * was half of the switch's time. The lines come in chunks of `CHUNK_LINES`: a chunk is an empty
 * box of its final height (`.tx-chunk-empty` in explorer.css: `CHUNK_LINES` lines of `LINE_PX`)
 * until it comes near the pane's view, and is filled then (an IntersectionObserver), or at once
 * when a line in it is asked for (selecting a node scrolls to its line). The first chunk and the
 * last (shorter) one are filled at once; without IntersectionObserver (jsdom) every chunk is. Marks (the current line, search matches, diff classes) are kept by line number
 * and applied to lines as they are made.
 *
 * Layer: front-end core; imports dom.ts.
 */
import { h, truncate } from "./dom";

/** About two panes' worth: the first chunk is laid out with the page, so no more than is seen. */
export const CHUNK_LINES = 40;
/** The line height of `.tx-source` in explorer.css. */
export const LINE_PX = 18;
const LINE_CHARS = 400;
/** How far outside the pane's view a chunk is filled ahead of scrolling to it. */
const AHEAD_PX = 900;

interface Chunk {
  el: HTMLElement;
  first: number; // 1-based number of its first line
  count: number;
  filled: boolean;
}

export class SourcePane {
  private texts: string[] = [];
  private classOf: (line: number) => string = () => "";
  private chunks: Chunk[] = [];
  private lines = new Map<number, HTMLElement>();
  private current: number | null = null;
  private marked = new Set<number>();
  private readonly observer: IntersectionObserver | null;

  constructor(readonly el: HTMLElement) {
    const IO = el.ownerDocument.defaultView?.IntersectionObserver;
    this.observer = IO
      ? new IO(
          (entries) => {
            for (const e of entries) {
              if (!e.isIntersecting) continue;
              const chunk = this.chunks.find((c) => c.el === e.target);
              if (chunk) this.fill(chunk);
            }
          },
          { root: el, rootMargin: `${AHEAD_PX}px 0px` },
        )
      : null;
  }

  /** Shows `source`; `classOf(line)` gives a line's extra classes (its diff, whether it has a node). */
  show(source: string, classOf: (line: number) => string): void {
    this.observer?.disconnect();
    this.texts = source.split("\n");
    this.classOf = classOf;
    this.lines = new Map();
    this.current = null;
    this.marked = new Set();
    const doc = this.el.ownerDocument;
    const frag = doc.createDocumentFragment();
    this.chunks = [];
    for (let first = 1; first <= this.texts.length; first += CHUNK_LINES) {
      const count = Math.min(CHUNK_LINES, this.texts.length - first + 1);
      // the first is in view when shown: drawn at once, not after a layout finds it on screen
      const cls = first === 1 ? "tx-source-chunk tx-chunk-first" : "tx-source-chunk tx-chunk-empty";
      const el = h(doc, "div", { class: cls, role: "presentation" });
      this.chunks.push({ el, first, count, filled: false });
      frag.appendChild(el);
    }
    this.el.replaceChildren(frag);
    // the first chunk now (it is what the pane shows), the others as they come near its view
    for (const c of this.chunks) {
      if (this.observer && c !== this.chunks[0] && c.count === CHUNK_LINES)
        this.observer.observe(c.el);
      else this.fill(c);
    }
  }

  clear(): void {
    this.observer?.disconnect();
    this.texts = [];
    this.chunks = [];
    this.lines = new Map();
    this.current = null;
    this.marked = new Set();
    this.el.replaceChildren();
  }

  /** The element of a line (1-based), made now if its chunk was not filled yet. */
  line(n: number): HTMLElement | undefined {
    const chunk = this.chunks[Math.floor((n - 1) / CHUNK_LINES)];
    if (chunk) this.fill(chunk);
    return this.lines.get(n);
  }

  /** Marks `n` as the current line (`aria-current`), or none. */
  setCurrent(n: number | null): void {
    if (this.current !== null) this.lines.get(this.current)?.removeAttribute("aria-current");
    this.current = n;
    if (n !== null) this.line(n)?.setAttribute("aria-current", "true");
  }

  /** Marks these lines as search matches (`search-match`). */
  setMarks(lines: Set<number>): void {
    for (const n of this.marked)
      if (!lines.has(n)) this.lines.get(n)?.classList.remove("search-match");
    for (const n of lines) this.lines.get(n)?.classList.add("search-match");
    this.marked = lines;
  }

  /** Scrolls only the pane (never the notebook page around the explorer) to show line `n`. */
  reveal(n: number): void {
    const el = this.line(n);
    if (!el) return;
    const pane = this.el;
    const top = (n - 1) * LINE_PX; // the chunks before it have their final height, filled or not
    if (top < pane.scrollTop || top + el.offsetHeight > pane.scrollTop + pane.clientHeight) {
      pane.scrollTop = Math.max(0, top - pane.clientHeight / 3);
    }
  }

  private fill(chunk: Chunk): void {
    if (chunk.filled) return;
    chunk.filled = true;
    this.observer?.unobserve(chunk.el);
    const doc = this.el.ownerDocument;
    const frag = doc.createDocumentFragment();
    for (let line = chunk.first; line < chunk.first + chunk.count; line++) {
      const extra = this.classOf(line);
      const el = h(
        doc,
        "div",
        {
          class: `tx-line${extra ? ` ${extra}` : ""}${this.marked.has(line) ? " search-match" : ""}`,
          "data-testid": "source-line",
          "data-line": line,
          role: "listitem",
          "aria-current": line === this.current ? "true" : null,
        },
        truncate(this.texts[line - 1] ?? "", LINE_CHARS) || " ",
      );
      this.lines.set(line, el);
      frag.appendChild(el);
    }
    chunk.el.classList.remove("tx-chunk-empty");
    chunk.el.appendChild(frag);
  }
}
