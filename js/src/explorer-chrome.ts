/**
 * The explorer's fixed controls: the header's title, status, search box, bookkeeping toggle,
 * whole-word and zoom buttons, the maximize button, and the handle that resizes the side pane.
 * Built here, wired up by explorer.ts.
 *
 * Layer: front-end core; imports only the safe DOM helpers.
 */
import { h, s } from "./dom";

/** The narrowest the side pane (trace source, details) can be dragged. */
const SIDE_MIN = 220;

export interface HeaderControls {
  titleEl: HTMLElement;
  statusEl: HTMLElement;
  searchEl: HTMLInputElement;
  searchList: HTMLElement;
  searchCount: HTMLElement;
  plumbingBox: HTMLInputElement;
  plumbingEl: HTMLElement;
  wholeWordEl: HTMLButtonElement;
  maximizeEl: HTMLButtonElement;
}

export function headerControls(doc: Document): HeaderControls {
  const titleEl = h(doc, "span", { class: "tx-title" });
  const statusEl = h(doc, "span", { class: "tx-status", "data-testid": "status", role: "status" });
  const searchEl = h(doc, "input", {
    type: "search",
    class: "tx-search",
    "data-testid": "search",
    placeholder: "Search op, value or module  ( / )",
    "aria-label": "search op, value, parameter or module name",
  });
  const searchList = h(doc, "ul", {
    class: "tx-search-results",
    "data-testid": "search-results",
    role: "listbox",
    "aria-label": "search matches",
    hidden: true,
  });
  const searchCount = h(doc, "span", { class: "tx-search-count", "data-testid": "search-count" });
  const plumbingBox = h(doc, "input", { type: "checkbox", "data-testid": "show-plumbing" });
  const plumbingEl = h(
    doc,
    "label",
    {
      class: "tx-plumbing",
      hidden: true,
      title:
        "attribute stores a library makes for its own bookkeeping (transformers' output collector): not computation",
    },
    plumbingBox,
    "",
  );
  const wholeWordEl = h(
    doc,
    "button",
    {
      type: "button",
      class: "tx-whole-word",
      "data-testid": "search-whole-word",
      "aria-pressed": "false",
      title: "Match whole words only (default: any part of a name, any case)",
    },
    "ab",
  );
  const maximizeEl = h(
    doc,
    "button",
    {
      type: "button",
      class: "tx-zoom tx-maximize",
      "data-testid": "maximize",
      "aria-pressed": "false",
      title: "give the explorer the whole tab (Esc restores)",
      "aria-label": "maximize",
    },
    s(
      doc,
      "svg",
      { viewBox: "0 0 12 12", width: 12, height: 12, "aria-hidden": "true" },
      s(doc, "path", {
        d: "M1 4V1h3M8 1h3v3M11 8v3H8M4 11H1V8",
        fill: "none",
        stroke: "currentColor",
      }),
    ),
  );
  return {
    titleEl,
    statusEl,
    searchEl,
    searchList,
    searchCount,
    plumbingBox,
    plumbingEl,
    wholeWordEl,
    maximizeEl,
  };
}

export function zoomButton(
  doc: Document,
  testid: string,
  text: string,
  label: string,
  fn: () => void,
): HTMLElement {
  const b = h(
    doc,
    "button",
    {
      type: "button",
      class: "tx-zoom",
      "data-testid": testid,
      title: label,
      "aria-label": label,
    },
    text,
  );
  b.addEventListener("click", fn);
  return b;
}

/** The handle on the side pane's left edge: drag it (or use the arrow keys) to give the trace
 * source and the details more or less room than the graph. */
export function sideSplitter(doc: Document): HTMLElement {
  const handle = h(doc, "div", {
    class: "tx-splitter",
    "data-testid": "side-splitter",
    role: "separator",
    "aria-orientation": "vertical",
    "aria-label": "resize the trace source pane",
    tabindex: 0,
  });
  const width = (): number => handle.parentElement?.getBoundingClientRect().width ?? 0;
  const setWidth = (w: number): void => {
    const body = handle.closest<HTMLElement>(".tx-body"); // the explorer's body holds the width
    if (!body) return;
    const total = body.getBoundingClientRect().width;
    const max = Math.max(SIDE_MIN, total * 0.7);
    body.style.setProperty("--tx-side-w", `${Math.round(Math.min(max, Math.max(SIDE_MIN, w)))}px`);
  };
  let drag: { x: number; w: number; id: number } | null = null;
  handle.addEventListener("pointerdown", (e) => {
    if (e.button !== 0) return;
    e.preventDefault();
    drag = { x: e.clientX, w: width(), id: e.pointerId };
    try {
      handle.setPointerCapture(e.pointerId);
    } catch {
      /* synthetic events have no capturable pointer */
    }
  });
  handle.addEventListener("pointermove", (e) => {
    if (drag && e.pointerId === drag.id) setWidth(drag.w - (e.clientX - drag.x));
  });
  const end = (): void => {
    drag = null;
  };
  handle.addEventListener("pointerup", end);
  handle.addEventListener("pointercancel", end);
  handle.addEventListener("keydown", (e) => {
    if (e.key !== "ArrowLeft" && e.key !== "ArrowRight") return;
    e.preventDefault();
    e.stopPropagation();
    setWidth(width() + (e.key === "ArrowLeft" ? 40 : -40));
  });
  return handle;
}
