/**
 * Safe DOM construction: the only way the explorer makes elements.
 *
 * Layer: front-end core, imports nothing. Document strings only ever reach the page as
 * `textContent` or as attribute values set with `setAttribute`; event-handler attributes and
 * URL-bearing attributes are refused outright, and nothing here parses markup.
 */

export const SVG_NS = "http://www.w3.org/2000/svg";

export type Attrs = Record<string, string | number | boolean | null | undefined>;
type Child = Node | string | null | undefined | false;

const FORBIDDEN_ATTR = /^(on|href$|src$|xlink:href$|srcdoc$|formaction$|action$|style$)/i;

export function setAttrs(el: Element, attrs: Attrs): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (FORBIDDEN_ATTR.test(name)) throw new Error(`refusing to set attribute ${name}`);
    if (value === null || value === undefined || value === false) el.removeAttribute(name);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
}

function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "string" ? el.ownerDocument.createTextNode(c) : c);
  }
}

/** An HTML element with attributes and children (strings become text nodes). */
export function h<K extends keyof HTMLElementTagNameMap>(
  doc: Document,
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = doc.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element with attributes and children. */
export function s(doc: Document, tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  const el = doc.createElementNS(SVG_NS, tag) as SVGElement;
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** `3 ops`, `1 op`: a count and its noun, plural unless one. */
export function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** Shortens text for a fixed-width box; the full text is in the details pane. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(1, max - 1))}…`;
}

/** Shortens text keeping its end (a module path's last parts say most). */
export function truncateStart(text: string, max: number): string {
  return text.length <= max ? text : `…${text.slice(text.length - Math.max(1, max - 1))}`;
}

/** `[2, 3]` -> `2×3`; a scalar tensor is `()`. */
export function formatShape(shape: readonly (number | string)[] | null): string {
  if (shape === null) return "";
  return shape.length === 0 ? "()" : shape.join("×");
}

export function formatMs(ms: number | null): string {
  if (ms === null) return "–";
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 1) return `${ms.toFixed(2)} ms`;
  return `${(ms * 1000).toFixed(1)} µs`;
}

/** `text` that may wrap after each `.` and `_` (a module path, a parameter's name), never
 * mid-word (`ln_1.w eight`): a <wbr> marks each place; the text itself is unchanged. */
export function breakable(doc: Document, text: string): DocumentFragment {
  const out = doc.createDocumentFragment();
  for (const part of text.split(/(?<=[._])/)) {
    if (out.childNodes.length) out.appendChild(doc.createElement("wbr"));
    out.appendChild(doc.createTextNode(part));
  }
  return out;
}
