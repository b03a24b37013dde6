import { afterEach, describe, expect, test, vi } from "vitest";
import { CHUNK_LINES, SourcePane } from "../src/source-pane";

/** An IntersectionObserver whose callback the test fires by hand. */
class FakeObserver {
  static last: FakeObserver | null = null;
  observed = new Set<Element>();
  constructor(
    readonly callback: (entries: { target: Element; isIntersecting: boolean }[]) => void,
  ) {
    FakeObserver.last = this;
  }
  observe(el: Element): void {
    this.observed.add(el);
  }
  unobserve(el: Element): void {
    this.observed.delete(el);
  }
  disconnect(): void {
    this.observed.clear();
  }
  comeIntoView(el: Element): void {
    this.callback([{ target: el, isIntersecting: true }]);
  }
}

function source(lines: number): string {
  return Array.from({ length: lines }, (_, i) => `t${i + 1} = f(t${i})`).join("\n");
}

const made = (el: HTMLElement) => el.querySelectorAll("[data-testid='source-line']").length;

describe("the source pane", () => {
  afterEach(() => vi.unstubAllGlobals());

  test("makes the lines of a chunk only when it comes near the view or one of its lines is asked for", () => {
    vi.stubGlobal("IntersectionObserver", FakeObserver);
    const el = document.createElement("div");
    const pane = new SourcePane(el);
    const inThird = 2 * CHUNK_LINES + 10; // a line of the third chunk
    const inSecond = CHUNK_LINES + 10;
    pane.show(source(3 * CHUNK_LINES + 10), (line) =>
      line === inThird ? "diff-added has-node" : "",
    );
    const chunks = Array.from(el.children) as HTMLElement[];
    expect(chunks).toHaveLength(4);
    // the first chunk and the short last one at once; the others wait, as boxes of their height
    expect(made(el)).toBe(CHUNK_LINES + 10);
    expect(chunks.map((c) => c.classList.contains("tx-chunk-empty"))).toEqual([
      false,
      true,
      true,
      false,
    ]);
    const observer = FakeObserver.last!;
    expect([...observer.observed]).toEqual([chunks[1], chunks[2]]);

    pane.setMarks(new Set([5, inSecond]));
    pane.setCurrent(inThird); // a line in an unmade chunk: made now, marked
    expect(chunks[2]!.classList.contains("tx-chunk-empty")).toBe(false);
    const current = el.querySelector("[aria-current='true']")!;
    expect(current.getAttribute("data-line")).toBe(String(inThird));
    expect(current.className).toContain("diff-added");
    expect(observer.observed.has(chunks[2]!)).toBe(false);

    observer.comeIntoView(chunks[1]!); // scrolled near: made, with the marks set before
    expect(made(el)).toBe(3 * CHUNK_LINES + 10);
    const marked = Array.from(el.querySelectorAll(".search-match")).map((l) =>
      l.getAttribute("data-line"),
    );
    expect(marked).toEqual(["5", String(inSecond)]);
    expect(el.querySelector(`[data-line='${inSecond}']`)!.textContent).toBe(
      `t${inSecond} = f(t${inSecond - 1})`,
    );
  });

  test("without IntersectionObserver every line is made at once", () => {
    vi.stubGlobal("IntersectionObserver", undefined);
    const el = document.createElement("div");
    new SourcePane(el).show(source(250), () => "");
    expect(made(el)).toBe(250);
    expect(el.querySelector(".tx-chunk-empty")).toBeNull();
  });
});
