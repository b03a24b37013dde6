/**
 * An overview of the whole graph in a corner of it: every item as a small rectangle (one
 * <path>, however many), the viewport as a frame; a click or a drag on it moves the view there.
 *
 * Layer: front-end core; imports the safe DOM helpers. The graph view owns it: it tells it the
 * content and the viewport, both in graph coordinates, and hears back where to centre the view.
 * It hides itself while the viewport shows the whole graph.
 */
import { s, setAttrs } from "./dom";

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

export class Minimap {
  readonly el: SVGSVGElement;
  private readonly items: SVGElement;
  private readonly frame: SVGElement;
  private bounds: Rect | null = null;

  constructor(
    doc: Document,
    private readonly onMove: (x: number, y: number) => void,
  ) {
    this.el = s(doc, "svg", {
      class: "tx-minimap",
      "data-testid": "minimap",
      role: "img",
      "aria-label": "graph overview: click or drag to move the view",
      preserveAspectRatio: "xMidYMid meet",
    }) as SVGSVGElement;
    this.items = s(doc, "path", { class: "tx-minimap-items", d: "" });
    this.frame = s(doc, "rect", { class: "tx-minimap-frame", "data-testid": "minimap-frame" });
    this.el.append(this.items, this.frame);
    this.listen();
  }

  /** The whole content: its bounds and its items' rectangles. */
  setContent(bounds: Rect, rects: Iterable<Rect>): void {
    this.bounds = bounds;
    setAttrs(this.el, { viewBox: `${bounds.x} ${bounds.y} ${bounds.w} ${bounds.h}` });
    const parts: string[] = [];
    for (const r of rects) {
      parts.push(
        `M${Math.round(r.x)} ${Math.round(r.y)}h${Math.round(r.w)}v${Math.round(r.h)}h${-Math.round(r.w)}z`,
      );
    }
    this.items.setAttribute("d", parts.join(""));
  }

  /** The part of the graph in view. */
  setViewport(view: Rect): void {
    setAttrs(this.frame, { x: view.x, y: view.y, width: view.w, height: view.h });
    const b = this.bounds;
    const all =
      !b ||
      (view.x <= b.x &&
        view.y <= b.y &&
        view.x + view.w >= b.x + b.w &&
        view.y + view.h >= b.y + b.h);
    this.el.classList.toggle("tx-minimap-idle", all);
  }

  private listen(): void {
    let dragging: number | null = null;
    const move = (e: PointerEvent): void => {
      const b = this.bounds;
      const p = b && minimapPoint(e.clientX, e.clientY, this.el.getBoundingClientRect(), b);
      if (p) this.onMove(p.x, p.y);
    };
    this.el.addEventListener("pointerdown", (e) => {
      if (e.button !== 0) return;
      e.preventDefault();
      dragging = e.pointerId;
      try {
        this.el.setPointerCapture(e.pointerId);
      } catch {
        /* synthetic events have no capturable pointer */
      }
      move(e);
    });
    this.el.addEventListener("pointermove", (e) => {
      if (dragging === e.pointerId) move(e);
    });
    const end = (e: PointerEvent): void => {
      if (dragging === e.pointerId) dragging = null;
    };
    this.el.addEventListener("pointerup", end);
    this.el.addEventListener("pointercancel", end);
  }
}

/** The graph point under a client point of the minimap (its viewBox is `bounds`, centred). */
export function minimapPoint(
  clientX: number,
  clientY: number,
  box: { left: number; top: number; width: number; height: number },
  bounds: Rect,
): { x: number; y: number } | null {
  if (!box.width || !box.height || !bounds.w || !bounds.h) return null;
  const scale = Math.min(box.width / bounds.w, box.height / bounds.h);
  const ox = (box.width - bounds.w * scale) / 2;
  const oy = (box.height - bounds.h * scale) / 2;
  return {
    x: bounds.x + (clientX - box.left - ox) / scale,
    y: bounds.y + (clientY - box.top - oy) / scale,
  };
}
