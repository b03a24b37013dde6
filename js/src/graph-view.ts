/**
 * The graph of one step as a single SVG: nodes, value edges, groups; pan, zoom, fit, culling,
 * and an overview (minimap.ts) of it.
 *
 * Layer: front-end core; imports the schema types, the layout's output, what scopes.ts makes of
 * a step's scopes and `del` statements, the minimap and the safe DOM helpers.
 * It owns no explorer state: the explorer tells it which step, which groups are collapsed, what
 * is selected and what matches the search, and hears back about clicks.
 *
 * Note [Graph rendering cost]: all edges are one <path> (one element however many edges), nodes
 * are a <g> with two rects and two texts, built into a fragment and attached once. Above
 * CULL_THRESHOLD items only those near the viewport are built; panning inside the built region
 * only moves a transform, leaving it rebuilds the region (once per animation frame).
 */
import { formatShape, h, s, setAttrs, truncate, truncateStart } from "./dom";
import { OUTPUT_ID, type StepLayout } from "./layout";
import { Minimap } from "./minimap";
import type { Group, Step, TraceNode } from "./schema";
import { delNotes, groupChains, scopeStats, type DelNote, type ScopeStats } from "./scopes";

export const NODE_W = 168;
export const NODE_H = 44;
const COL_W = 200;
const ROW_H = 84;
const IO_W = 128;
const IO_H = 26;
const CULL_THRESHOLD = 1500;
const MIN_ZOOM = 0.05;
/** A step opens no smaller than this (text is hidden below 0.4); "fit" goes as small as it takes. */
const OPEN_ZOOM = 0.6;
const MAX_ZOOM = 4;
/** Note [Scope labels]: a label's band, the padding of a box around its members, the room kept
 * between a label and the nodes above, where the label text starts, and a wide character's width. */
const LABEL_H = 16;
const BOX_PAD = 6;
const LABEL_GAP = 2;
const LABEL_X = 24;
const LABEL_CHAR_W = 7;
/** Below this graph height (px) the overview is hidden: it would take room the graph needs. */
const MINIMAP_MIN_PANE = 360;
const LABEL_CHARS = 24;
const IO_CHARS = 22;
const MAX_GROUP_DEPTH = 32;
/** A collapsed item hiding more step inputs than this draws them inside it (a count). */
const MAX_BESIDE = 3;
/** Runs of this many empty rows or columns are taken out (Note [Compaction]). */
const COMPACT_RUN = 2;

/** Executors with their own colour in explorer.css; others get one of the palette colours. */
const KNOWN_EXECUTORS = new Set([
  "torch",
  "python",
  "torchcompile",
  "nvfuser",
  "cudnn",
  "sdpa",
  "triton",
]);
const PALETTE_SIZE = 6;

/** The CSS class colouring an executor (never built from document text, so always a safe name). */
export function executorClass(executor: string | null): string {
  if (executor === null) return "exec-none";
  if (KNOWN_EXECUTORS.has(executor)) return `exec-${executor}`;
  let hash = 0;
  for (let i = 0; i < executor.length; i++) hash = (hash * 31 + executor.charCodeAt(i)) >>> 0;
  return `exec-p${hash % PALETTE_SIZE}`;
}

interface Item {
  key: string;
  kind: "node" | "io" | "group";
  /** The layout's cell; `x`, `y` are where it is drawn (Note [Compaction]). */
  row: number;
  col: number;
  x: number;
  y: number;
  w: number;
  h: number;
  node?: TraceNode;
  group?: Group;
  label: string;
  sub: string;
  /** A small line under it: inputs drawn inside it, values freed after it. */
  note: string;
}

/** A group box before rows have their heights (Note [Scope labels]): rows, x extent, slot. */
interface Span {
  group: Group;
  collapsed: boolean;
  depth: number;
  x0: number;
  x1: number;
  top: number;
  bottom: number;
  members: Item[];
  inner: Span[];
  slot: number;
}

/** A group box's label as drawn: cut to the box's width. */
function groupLabelText(group: Group, collapsed: boolean, width: number): string {
  const label = collapsed
    ? `${group.kind} · ${group.nodes.length - 1} ops`
    : `${group.label || group.id} (${group.kind})`;
  return truncate(label, Math.max(8, Math.floor((width - LABEL_X) / LABEL_CHAR_W)));
}

/** How far a box's label reaches from the box's left edge (toggle and text). */
function groupLabelWidth(group: Group, collapsed: boolean, width: number): number {
  return LABEL_X + groupLabelText(group, collapsed, width).length * LABEL_CHAR_W + 4;
}

interface GroupBox {
  group: Group;
  /** A collapsed fusion's frame around its fusion node. */
  collapsed: boolean;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface GraphCallbacks {
  onSelect(nodeId: string | null): void;
  onToggleGroup(groupId: string): void;
}

export interface GraphState {
  step: Step;
  layout: StepLayout;
  isCollapsed(groupId: string): boolean;
  /** node id -> diff class (`diff-added`, `diff-rewritten`, `diff-fused`). */
  diffClass: Map<string, string>;
}

interface View {
  tx: number;
  ty: number;
  k: number;
}

export class GraphView {
  readonly svg: SVGSVGElement;
  /** The overview; the explorer places it over the graph. */
  readonly minimap: Minimap;
  /** "Click the graph or hold Ctrl to zoom": shown a moment when the wheel scrolled the page. */
  readonly wheelHint: HTMLElement;
  private engaged = false;
  private hintTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  private readonly viewport: SVGElement;
  private readonly groupLayer: SVGElement;
  private readonly edgePath: SVGElement;
  private readonly selectedEdgePath: SVGElement;
  private readonly nodeLayer: SVGElement;
  private readonly doc: Document;

  private state: GraphState | null = null;
  private chains = new Map<string, Group[]>();
  private stats = new Map<string, ScopeStats>();
  private notes = new Map<string, DelNote>();
  private items: Item[] = [];
  private itemByKey = new Map<string, Item>();
  private repOf = new Map<string, string>();
  private edges: [Item, Item][] = [];
  private boxes: GroupBox[] = [];
  private rendered = new Map<string, SVGElement>();
  private region: { x0: number; y0: number; x1: number; y1: number } | null = null;
  private view: View = { tx: 20, ty: 20, k: 1 };
  private hasView = false;
  private selected: string | null = null;
  private matches = new Set<string>();
  private frame = 0;
  private measured: { width: number; height: number } | null = null;
  /** A ResizeObserver keeps `measured` up to date (else it is read again for each step). */
  private readonly observed: boolean;
  private readonly cleanups: (() => void)[] = [];

  constructor(
    doc: Document,
    private readonly callbacks: GraphCallbacks,
  ) {
    this.doc = doc;
    this.svg = s(doc, "svg", {
      "data-testid": "graph",
      class: "graph",
      role: "img",
      "aria-label": "trace graph",
    }) as SVGSVGElement;
    this.viewport = s(doc, "g", { class: "viewport" });
    this.groupLayer = s(doc, "g", { class: "groups" });
    this.edgePath = s(doc, "path", { class: "edges", d: "" });
    this.selectedEdgePath = s(doc, "path", { class: "edges-selected", d: "" });
    this.nodeLayer = s(doc, "g", { class: "nodes" });
    this.viewport.append(this.groupLayer, this.edgePath, this.selectedEdgePath, this.nodeLayer);
    this.svg.appendChild(this.viewport);
    this.minimap = new Minimap(doc, (x, y) => this.centerOn(x, y));
    this.wheelHint = h(
      doc,
      "div",
      { class: "tx-wheel-hint", "data-testid": "wheel-hint", hidden: true },
      "Click the graph, or hold Ctrl (⌘) while scrolling, to zoom",
    );
    this.listen();
    this.observed = typeof ResizeObserver === "function";
    if (this.observed) {
      const observer = new ResizeObserver((entries) => {
        const box = entries[entries.length - 1]?.contentRect;
        if (!box || !box.width || !box.height) return;
        this.measured = { width: box.width, height: box.height };
        this.onViewChanged();
      });
      observer.observe(this.svg);
      this.cleanups.push(() => observer.disconnect());
    }
  }

  /**
   * Shows a step, keeping the current pan and zoom so that surviving nodes stay put on screen;
   * a step with nothing where the view is (a backward step after the forward) opens afresh.
   */
  setStep(state: GraphState): void {
    this.state = state;
    this.chains = groupChains(state.step);
    this.stats = scopeStats(state.step, this.chains);
    this.notes = delNotes(state.step);
    if (!this.observed) this.measured = null;
    this.build();
    if (!this.hasView || !this.anythingInView()) {
      this.fitWithin(OPEN_ZOOM);
      this.hasView = true;
    } else {
      this.applyView();
    }
    this.render();
  }

  /** Rebuilds after groups were collapsed or expanded. */
  refresh(): void {
    if (!this.state) return;
    this.build();
    this.render();
  }

  setSelected(nodeId: string | null): void {
    this.selected = nodeId;
    for (const [key, el] of this.rendered)
      setAttrs(el, { "aria-selected": key === nodeId ? "true" : null });
    for (const el of Array.from(this.groupLayer.children)) {
      const box = this.boxes.find((b) => b.group.id === el.getAttribute("data-group-id"));
      setAttrs(el, {
        "aria-selected":
          box && box.group.node !== null && box.group.node === nodeId ? "true" : null,
      });
    }
    this.drawSelectedEdges();
  }

  setMatches(ids: Set<string>): void {
    this.matches = ids;
    for (const [key, el] of this.rendered) el.classList.toggle("search-match", ids.has(key));
  }

  /** The key of the item standing for a node: itself, or the collapsed group hiding it. */
  representative(nodeId: string): string | undefined {
    return this.repOf.get(nodeId);
  }

  /** Brings an item into view if it is outside the viewport; `readable` (a search result the
   * user chose) also zooms in, centred on it, when the view is too small to read its label. */
  reveal(nodeId: string, readable = false): void {
    const item = this.itemByKey.get(this.repOf.get(nodeId) ?? nodeId);
    if (!item) return;
    const { width, height } = this.size();
    const { tx, ty } = this.view;
    let { k } = this.view;
    const sx = item.x * k + tx;
    const sy = item.y * k + ty;
    const small = readable && k < OPEN_ZOOM;
    if (small) k = OPEN_ZOOM;
    else if (sx >= 0 && sy >= 0 && sx + item.w * k <= width && sy + item.h * k <= height) return;
    this.view = {
      k,
      tx: width / 2 - (item.x + item.w / 2) * k,
      ty: height / 2 - (item.y + item.h / 2) * k,
    };
    this.onViewChanged();
  }

  zoomBy(factor: number, cx?: number, cy?: number): void {
    const { width, height } = this.size();
    const px = cx ?? width / 2;
    const py = cy ?? height / 2;
    const b = this.bounds();
    const min = b ? Math.min(MIN_ZOOM, this.fitZoom(b)) : MIN_ZOOM;
    const k = Math.min(MAX_ZOOM, Math.max(min, this.view.k * factor));
    const f = k / this.view.k;
    this.view = { k, tx: px - (px - this.view.tx) * f, ty: py - (py - this.view.ty) * f };
    this.onViewChanged();
  }

  /** Fits the whole graph in the viewport, however small that makes it. */
  fit(): void {
    this.fitWithin(0);
  }

  /** Centres the view on a graph point (the minimap's clicks). */
  centerOn(x: number, y: number): void {
    const { width, height } = this.size();
    const { k } = this.view;
    this.view = { k, tx: width / 2 - x * k, ty: height / 2 - y * k };
    this.onViewChanged();
  }

  private anythingInView(): boolean {
    const { width, height } = this.size();
    const { tx, ty, k } = this.view;
    return this.items.some(
      (it) =>
        (it.x + it.w) * k + tx >= 0 &&
        it.x * k + tx <= width &&
        (it.y + it.h) * k + ty >= 0 &&
        it.y * k + ty <= height,
    );
  }

  private fitZoom(b: { x0: number; y0: number; x1: number; y1: number }): number {
    const { width, height } = this.size();
    return Math.min((width - 40) / (b.x1 - b.x0), (height - 40) / (b.y1 - b.y0));
  }

  /** Fits the graph if it can be shown at `minZoom` or larger, else shows its top at `minZoom`. */
  private fitWithin(minZoom: number): void {
    const b = this.bounds();
    const { width, height } = this.size();
    if (!b) return;
    const k = Math.min(1, Math.max(minZoom, this.fitZoom(b)));
    const contentW = (b.x1 - b.x0) * k;
    const tx = contentW < width ? (width - contentW) / 2 - b.x0 * k : 20 - b.x0 * k;
    const contentH = (b.y1 - b.y0) * k;
    const ty = contentH < height ? (height - contentH) / 2 - b.y0 * k : 20 - b.y0 * k;
    this.view = { tx, ty, k };
    this.onViewChanged();
  }

  /** Pans by a screen-space offset. */
  panBy(dx: number, dy: number): void {
    this.view = { ...this.view, tx: this.view.tx + dx, ty: this.view.ty + dy };
    this.onViewChanged();
  }

  /** Whether the wheel zooms the graph (it was clicked) rather than scrolling the page. */
  get wheelZooms(): boolean {
    return this.engaged;
  }

  private setEngaged(on: boolean): void {
    this.engaged = on;
    this.svg.classList.toggle("engaged", on);
    if (on) this.wheelHint.hidden = true;
  }

  private showWheelHint(): void {
    this.wheelHint.hidden = false;
    clearTimeout(this.hintTimer);
    this.hintTimer = setTimeout(() => (this.wheelHint.hidden = true), 1500);
  }

  dispose(): void {
    clearTimeout(this.hintTimer);
    cancelAnimationFrameSafe(this.frame);
    for (const c of this.cleanups) c();
    this.cleanups.length = 0;
  }

  // -- model --------------------------------------------------------------------------------

  private build(): void {
    const state = this.state;
    if (!state) return;
    const { step, layout, isCollapsed } = state;
    const cell = new Map<string, { row: number; col: number }>();
    layout.ids.forEach((id, i) => {
      cell.set(id, { row: layout.layer[i] as number, col: layout.col[i] as number });
    });
    const chains = this.chains;

    // Which groups each node sits in (directly listed, plus ancestors).
    const groupsOfNode = new Map<string, Group[]>();
    for (const g of step.groups) {
      for (const nid of g.nodes) {
        const list = groupsOfNode.get(nid);
        if (list) list.push(g);
        else groupsOfNode.set(nid, [g]);
      }
    }

    const items: Item[] = [];
    const itemByKey = new Map<string, Item>();
    const repOf = new Map<string, string>();
    /** Items standing for hidden nodes: collapsed group boxes and collapsed fusion nodes. */
    const hiding = new Set<string>();
    const add = (item: Item): void => {
      items.push(item);
      itemByKey.set(item.key, item);
    };

    // Note [Fusion groups]: a fusion group with a `node` is collapsed into that fusion node
    // (a plain node, drawn where its first member is) and expanded into its members, with the
    // fusion node hidden. Other collapsed groups become one box standing for their nodes.
    const nodeIds = new Set(step.nodes.map((n) => n.id));
    const fusionNodeOf = (g: Group): string | null =>
      g.kind === "fusion" && g.node !== null && nodeIds.has(g.node) ? g.node : null;
    const expandedFusionNodes = new Set<string>();
    for (const g of step.groups) {
      const f = fusionNodeOf(g);
      if (f !== null && !isCollapsed(g.id)) expandedFusionNodes.add(f);
    }
    for (const node of step.nodes) {
      const p = cell.get(node.id);
      if (!p || repOf.has(node.id)) continue;
      const collapsedGroup = outermostCollapsed(groupsOfNode.get(node.id), chains, isCollapsed);
      const fusionNode = collapsedGroup ? fusionNodeOf(collapsedGroup) : null;
      if (collapsedGroup && fusionNode === null) {
        const key = `group:${collapsedGroup.id}`;
        repOf.set(node.id, key);
        if (!itemByKey.has(key)) {
          const st = this.stats.get(collapsedGroup.id);
          const executors = st?.executors.length ? ` · ${st.executors.join(", ")}` : "";
          add({
            key,
            kind: "group",
            ...p,
            x: 0,
            y: 0,
            w: NODE_W,
            h: NODE_H,
            group: collapsedGroup,
            label: collapsedGroup.label || collapsedGroup.id,
            sub: `${st?.ops ?? 0} ops${executors}`,
            note: "",
          });
          hiding.add(key);
        }
        continue;
      }
      if (fusionNode !== null && fusionNode !== node.id) {
        repOf.set(node.id, fusionNode); // a member of a collapsed fusion
        hiding.add(fusionNode);
        continue;
      }
      if (fusionNode === null && expandedFusionNodes.has(node.id)) continue; // shown as its members
      repOf.set(node.id, node.id);
      const freed = this.notes.get(node.id);
      add({
        key: node.id,
        kind: "node",
        ...p,
        x: 0,
        y: 0,
        w: NODE_W,
        h: NODE_H,
        node,
        label: node.label || node.op,
        sub: nodeSubtitle(node),
        note: freed ? `del ${freed.names.join(", ")}` : "",
      });
    }

    // Step inputs used only inside one collapsed item are drawn inside it when there are more
    // than a few (a block's parameters); the few are drawn beside it, where the layout put them.
    // Being returned (saved for the backward) does not count as a use here.
    const returns = new Set<string>();
    for (const e of step.edges) if (e.target === OUTPUT_ID) returns.add(e.source);
    const usedBy = new Map<string, Set<string>>();
    for (const e of [...step.edges, ...step.inner_edges]) {
      const r = repOf.get(e.target);
      if (r === undefined || returns.has(e.target) || !e.source.startsWith("input:")) continue;
      const set = usedBy.get(e.source) ?? new Set<string>();
      set.add(r);
      usedBy.set(e.source, set);
    }
    const inside = new Map<string, string[]>();
    for (const [id, reps] of usedBy) {
      const only = reps.size === 1 ? (reps.values().next().value as string) : undefined;
      if (only === undefined || !hiding.has(only)) continue;
      const list = inside.get(only);
      if (list) list.push(id);
      else inside.set(only, [id]);
    }
    for (const [key, ids] of inside) {
      if (ids.length <= MAX_BESIDE) continue;
      for (const id of ids) repOf.set(id, key);
      const it = itemByKey.get(key);
      if (it) it.note = [`${ids.length} inputs inside`, it.note].filter(Boolean).join(" · ");
    }
    const ios: Item[] = [];
    for (const input of step.inputs) {
      const id = `input:${input.name}`;
      const p = cell.get(id);
      if (!p || repOf.has(id)) continue;
      ios.push(
        ioItem(id, p, input.name, `${formatShape(input.shape)} ${input.dtype ?? ""}`.trim()),
      );
      repOf.set(id, id);
    }
    const out = cell.get(OUTPUT_ID);
    if (out) {
      ios.push(ioItem(OUTPUT_ID, out, "return", step.outputs.join(", ")));
      repOf.set(OUTPUT_ID, OUTPUT_ID);
    }
    for (const it of ios) add(it);

    // Note [Compaction]: what collapsing hides (and what a pass removed) leaves rows and columns
    // with nothing drawn; a run of two or more of them is taken out, so a collapsed box sits
    // among its neighbours. Cells only move towards each other, so order is kept, and a single
    // empty line stays: a small fusion does not shift what follows it from one step to the next.
    const rowAt = compactAxis(items.map((it) => it.row));
    const colAt = compactAxis(items.map((it) => it.col));
    const rowOf = new Map<Item, number>();
    for (const it of items) {
      it.x = (colAt.get(it.col) as number) * COL_W + (it.kind === "io" ? (NODE_W - IO_W) / 2 : 0);
      rowOf.set(it, rowAt.get(it.row) as number);
    }

    // Boxes around expanded groups whose ancestors are all expanded (around their members and
    // the boxes of their child groups), and a frame (holding the expand toggle) around each
    // collapsed fusion node. Note [Scope labels]: each box's label sits in the gap above the
    // row of its top members, in a slot of its own (a parent's above its children's, side by
    // side labels that would touch in different slots), and that gap grows to hold its slots:
    // labels never overlap each other or a node.
    const children = new Map<string, Group[]>();
    for (const g of step.groups) {
      if (g.parent === null || g.parent === g.id) continue;
      const list = children.get(g.parent);
      if (list) list.push(g);
      else children.set(g.parent, [g]);
    }
    const spans: Span[] = [];
    const spanOf = new Map<string, Span | null>();
    const computeSpan = (g: Group, depth: number): Span | null => {
      if (spanOf.has(g.id)) return spanOf.get(g.id) ?? null;
      spanOf.set(g.id, null); // guards against parent cycles in a malformed document
      const fusionNode = fusionNodeOf(g);
      const collapsed = isCollapsed(g.id);
      if (collapsed && fusionNode === null) return null; // drawn as a box item
      const pad = collapsed ? 5 : BOX_PAD;
      const span: Span = {
        group: g,
        collapsed,
        depth,
        x0: Infinity,
        x1: -Infinity,
        top: Infinity,
        bottom: -Infinity,
        members: [],
        inner: [],
        slot: 0,
      };
      const cover = (it: Item): void => {
        const r = rowOf.get(it) as number;
        span.members.push(it);
        span.x0 = Math.min(span.x0, it.x - pad);
        span.x1 = Math.max(span.x1, it.x + it.w + pad);
        span.top = Math.min(span.top, r);
        span.bottom = Math.max(span.bottom, r);
      };
      const memberIds = collapsed
        ? [fusionNode as string]
        : g.nodes.filter((nid) => nid !== fusionNode);
      for (const nid of memberIds) {
        const it = itemByKey.get(repOf.get(nid) ?? "");
        if (it) cover(it);
      }
      if (!collapsed && depth < MAX_GROUP_DEPTH) {
        for (const child of children.get(g.id) ?? []) {
          const inner = computeSpan(child, depth + 1);
          if (inner) {
            span.inner.push(inner);
            span.x0 = Math.min(span.x0, inner.x0 - pad);
            span.x1 = Math.max(span.x1, inner.x1 + pad);
            span.top = Math.min(span.top, inner.top);
            span.bottom = Math.max(span.bottom, inner.bottom);
          } else if (isCollapsed(child.id)) {
            const it = itemByKey.get(`group:${child.id}`);
            if (it) cover(it);
          }
        }
      }
      if (span.x0 === Infinity) return null;
      spanOf.set(g.id, span);
      spans.push(span);
      return span;
    };
    for (const g of step.groups) {
      const chain = chains.get(g.id) as Group[];
      if (chain.slice(1).some((c) => isCollapsed(c.id))) continue;
      computeSpan(g, 0);
    }
    // slots, innermost first: above the children that share the gap, clear of the labels there
    const taken = new Map<string, [number, number][]>(); // "row slot" -> label extents
    const slotsAbove = new Map<number, number>(); // row -> slots its gap holds
    for (const sp of [...spans].sort((a, b) => b.depth - a.depth)) {
      let slot = 0;
      for (const c of sp.inner) if (c.top === sp.top) slot = Math.max(slot, c.slot + 1);
      const [a, b] = [sp.x0, sp.x0 + groupLabelWidth(sp.group, sp.collapsed, sp.x1 - sp.x0)];
      while ((taken.get(`${sp.top} ${slot}`) ?? []).some(([p, q]) => a < q && p < b)) slot++;
      sp.slot = slot;
      const key = `${sp.top} ${slot}`;
      taken.set(key, [...(taken.get(key) ?? []), [a, b]]);
      slotsAbove.set(sp.top, Math.max(slotsAbove.get(sp.top) ?? 0, slot + 1));
    }
    // each row's top: the rows above, and the label slots of the gaps above it
    const rows = Math.max(0, ...[...rowOf.values()].map((r) => r + 1));
    const rowY: number[] = [];
    let grown = 0;
    for (let r = 0; r < rows; r++) {
      const need = (slotsAbove.get(r) ?? 0) * LABEL_H + BOX_PAD + LABEL_GAP;
      grown += Math.max(0, need - (ROW_H - NODE_H));
      rowY.push(r * ROW_H + grown);
    }
    for (const it of items)
      it.y =
        (rowY[rowOf.get(it) as number] as number) + (it.kind === "io" ? (NODE_H - IO_H) / 2 : 0);

    // Top-level edges plus the edges of fusion members, each end mapped to what stands for it:
    // an edge of a hidden fusion node or inside one item disappears, duplicates merge.
    const edges: [Item, Item][] = [];
    const seenEdges = new Set<string>();
    for (const e of [...step.edges, ...step.inner_edges]) {
      const a = repOf.get(e.source);
      const b = repOf.get(e.target);
      if (a === undefined || b === undefined || a === b) continue;
      const key = `${a}\u0000${b}`;
      if (seenEdges.has(key)) continue;
      seenEdges.add(key);
      const ia = itemByKey.get(a);
      const ib = itemByKey.get(b);
      if (ia && ib) edges.push([ia, ib]);
    }

    const boxes: GroupBox[] = [];
    const bottomOf = new Map<Span, number>();
    const bottom = (sp: Span): number => {
      const known = bottomOf.get(sp);
      if (known !== undefined) return known;
      const pad = sp.collapsed ? 5 : BOX_PAD;
      let y = -Infinity;
      for (const it of sp.members) y = Math.max(y, it.y + it.h);
      for (const c of sp.inner) y = Math.max(y, bottom(c));
      bottomOf.set(sp, y + pad);
      return y + pad;
    };
    for (const sp of spans) {
      const pad = sp.collapsed ? 5 : BOX_PAD;
      const y = (rowY[sp.top] as number) - pad - (sp.slot + 1) * LABEL_H;
      boxes.push({
        group: sp.group,
        collapsed: sp.collapsed,
        x: sp.x0,
        y,
        w: sp.x1 - sp.x0,
        h: bottom(sp) - y,
      });
    }
    boxes.sort((a, b) => b.w * b.h - a.w * a.h); // big ones first, so inner boxes are on top

    this.items = items;
    this.itemByKey = itemByKey;
    this.repOf = repOf;
    this.edges = edges;
    this.boxes = boxes;
    this.region = null;
    const b = this.bounds();
    if (b) this.minimap.setContent({ x: b.x0, y: b.y0, w: b.x1 - b.x0, h: b.y1 - b.y0 }, items);
  }

  private bounds(): { x0: number; y0: number; x1: number; y1: number } | null {
    if (!this.items.length) return null;
    let x0 = Infinity,
      y0 = Infinity,
      x1 = -Infinity,
      y1 = -Infinity;
    for (const it of this.items) {
      x0 = Math.min(x0, it.x);
      y0 = Math.min(y0, it.y);
      x1 = Math.max(x1, it.x + it.w);
      y1 = Math.max(y1, it.y + it.h);
    }
    return { x0: x0 - 30, y0: y0 - 30, x1: x1 + 30, y1: y1 + 30 };
  }

  // -- rendering ----------------------------------------------------------------------------

  /**
   * The viewport size. Reading it forces a layout, so it is read once (after the explorer has
   * built everything else) and then kept up to date by a ResizeObserver.
   */
  private size(): { width: number; height: number } {
    if (!this.measured) {
      this.measured = { width: this.svg.clientWidth || 800, height: this.svg.clientHeight || 600 };
    }
    return this.measured;
  }

  private culling(): boolean {
    return this.items.length > CULL_THRESHOLD;
  }

  /** The graph-space rectangle to build: everything, or the viewport and a margin around it. */
  private wantedRegion(): { x0: number; y0: number; x1: number; y1: number } {
    if (!this.culling()) return { x0: -Infinity, y0: -Infinity, x1: Infinity, y1: Infinity };
    const { width, height } = this.size();
    const { tx, ty, k } = this.view;
    const w = width / k;
    const hgt = height / k;
    const x0 = -tx / k;
    const y0 = -ty / k;
    return { x0: x0 - w / 2, y0: y0 - hgt / 2, x1: x0 + w * 1.5, y1: y0 + hgt * 1.5 };
  }

  private render(): void {
    const doc = this.doc;
    const region = this.wantedRegion();
    this.region = region;
    const inRegion = (x: number, y: number, w: number, h: number): boolean =>
      x + w >= region.x0 && x <= region.x1 && y + h >= region.y0 && y <= region.y1;

    const groupFrag = doc.createDocumentFragment();
    for (const b of this.boxes) {
      if (!inRegion(b.x, b.y, b.w, b.h)) continue;
      groupFrag.appendChild(this.groupBoxElement(b));
    }
    this.groupLayer.replaceChildren(groupFrag);

    const parts: string[] = [];
    for (const [a, b] of this.edges) {
      const x0 = Math.min(a.x, b.x),
        y0 = Math.min(a.y, b.y);
      const x1 = Math.max(a.x + a.w, b.x + b.w),
        y1 = Math.max(a.y + a.h, b.y + b.h);
      if (!inRegion(x0, y0, x1 - x0, y1 - y0)) continue;
      parts.push(edgePathData(a, b));
    }
    this.edgePath.setAttribute("d", parts.join(""));

    const frag = doc.createDocumentFragment();
    const rendered = new Map<string, SVGElement>();
    const diffClass = this.state?.diffClass ?? new Map<string, string>();
    for (const it of this.items) {
      if (!inRegion(it.x, it.y, it.w, it.h)) continue;
      const el = this.itemElement(it, diffClass);
      rendered.set(it.key, el);
      frag.appendChild(el);
    }
    this.nodeLayer.replaceChildren(frag);
    this.rendered = rendered;
    this.drawSelectedEdges();
  }

  private itemElement(it: Item, diffClass: Map<string, string>): SVGElement {
    const doc = this.doc;
    if (it.kind === "io") {
      return s(
        doc,
        "g",
        {
          class: "io-node",
          "data-testid": "io",
          "data-io-id": it.key,
          transform: `translate(${it.x},${it.y})`,
        },
        s(doc, "title", {}, it.sub ? `${it.label}: ${it.sub}` : it.label),
        s(doc, "rect", { class: "io-box", width: it.w, height: it.h, rx: it.h / 2 }),
        s(
          doc,
          "text",
          { class: "io-label", x: it.w / 2, y: 17, "text-anchor": "middle" },
          ioText(it),
        ),
      );
    }
    if (it.kind === "group" && it.group) return this.collapsedGroupElement(it, it.group);
    const node = it.node as TraceNode;
    const classes = ["node", executorClass(node.executor)];
    if (node.fusion) classes.push("fusion");
    // a node whose `del` note this pass added shows as added: the del statements are new
    const freed = this.notes.get(node.id)?.dels;
    const diff =
      diffClass.get(node.id) ??
      (freed?.some((d) => diffClass.get(d) === "diff-added") ? "diff-added" : undefined);
    if (diff) classes.push(diff);
    if (this.matches.has(node.id)) classes.push("search-match");
    return s(
      doc,
      "g",
      {
        class: classes.join(" "),
        "data-testid": "node",
        "data-node-id": node.id,
        transform: `translate(${it.x},${it.y})`,
        "aria-selected": node.id === this.selected ? "true" : null,
      },
      s(doc, "rect", { class: "node-box", width: it.w, height: it.h, rx: 6 }),
      s(doc, "rect", { class: "node-band", width: 6, height: it.h, rx: 2 }),
      s(doc, "text", { class: "node-label", x: 14, y: 18 }, truncate(it.label, LABEL_CHARS)),
      s(doc, "text", { class: "node-sub", x: 14, y: 34 }, truncate(it.sub, LABEL_CHARS + 4)),
      noteElement(doc, it),
    );
  }

  private toggleElement(group: Group, collapsed: boolean, x: number, y: number): SVGElement {
    const doc = this.doc;
    return s(
      doc,
      "g",
      {
        class: "group-toggle",
        "data-testid": "group-toggle",
        "data-group-id": group.id,
        role: "button",
        "aria-expanded": collapsed ? "false" : "true",
        "aria-label": collapsed ? "expand group" : "collapse group",
        transform: `translate(${x},${y})`,
      },
      s(doc, "rect", { width: 14, height: 14, rx: 3 }),
      s(doc, "text", { x: 7, y: 11, "text-anchor": "middle" }, collapsed ? "+" : "−"),
    );
  }

  private collapsedGroupElement(it: Item, group: Group): SVGElement {
    const doc = this.doc;
    const classes = ["group", "collapsed", `group-${group.kind}`];
    return s(
      doc,
      "g",
      {
        class: classes.join(" "),
        "data-testid": "group",
        "data-group-id": group.id,
        transform: `translate(${it.x},${it.y})`,
      },
      s(doc, "title", {}, `${it.label}\n${it.sub}`),
      s(doc, "rect", { class: "group-box", width: it.w, height: it.h, rx: 8 }),
      s(
        doc,
        "text",
        { class: "node-label", x: 26, y: 18 },
        truncateStart(it.label, LABEL_CHARS - 3),
      ),
      s(doc, "text", { class: "node-sub", x: 26, y: 34 }, truncate(it.sub, LABEL_CHARS + 1)),
      this.toggleElement(group, true, 6, 6),
      noteElement(doc, it),
    );
  }

  private groupBoxElement(b: GroupBox): SVGElement {
    const doc = this.doc;
    return s(
      doc,
      "g",
      {
        class: `group group-${b.group.kind}${b.collapsed ? " collapsed-frame" : ""}`,
        "data-testid": "group",
        "data-group-id": b.group.id,
        transform: `translate(${b.x},${b.y})`,
        "aria-selected": b.group.node !== null && b.group.node === this.selected ? "true" : null,
      },
      s(doc, "rect", { class: "group-box", width: b.w, height: b.h, rx: 10 }),
      this.toggleElement(b.group, b.collapsed, 6, 1),
      s(
        doc,
        "text",
        { class: "group-label", x: LABEL_X, y: 12 },
        groupLabelText(b.group, b.collapsed, b.w),
      ),
    );
  }

  private drawSelectedEdges(): void {
    const sel = this.selected === null ? undefined : this.repOf.get(this.selected);
    const parts: string[] = [];
    if (sel !== undefined) {
      for (const [a, b] of this.edges)
        if (a.key === sel || b.key === sel) parts.push(edgePathData(a, b));
    }
    this.selectedEdgePath.setAttribute("d", parts.join(""));
  }

  private applyView(): void {
    const { tx, ty, k } = this.view;
    this.viewport.setAttribute(
      "transform",
      `translate(${tx.toFixed(1)},${ty.toFixed(1)}) scale(${k.toFixed(4)})`,
    );
    this.svg.classList.toggle("lod-low", k < 0.4);
    const { width, height } = this.size();
    this.minimap.setViewport({ x: -tx / k, y: -ty / k, w: width / k, h: height / k });
    this.minimap.el.classList.toggle("tx-minimap-small", height < MINIMAP_MIN_PANE);
  }

  private onViewChanged(): void {
    this.applyView();
    if (!this.culling() || this.frame) return;
    this.frame = requestAnimationFrameSafe(() => {
      this.frame = 0;
      const have = this.region;
      const { width, height } = this.size();
      const { tx, ty, k } = this.view;
      const vx0 = -tx / k,
        vy0 = -ty / k,
        vx1 = vx0 + width / k,
        vy1 = vy0 + height / k;
      if (!have || vx0 < have.x0 || vy0 < have.y0 || vx1 > have.x1 || vy1 > have.y1) {
        this.render();
      }
    });
  }

  // -- input ----------------------------------------------------------------------------------

  private listen(): void {
    const svg = this.svg;
    let drag: { x: number; y: number; id: number; moved: boolean } | null = null;
    let suppressClick = false;

    const on = <K extends keyof SVGElementEventMap>(
      type: K,
      fn: (e: SVGElementEventMap[K]) => void,
      opts?: AddEventListenerOptions,
    ): void => {
      svg.addEventListener(type, fn as EventListener, opts);
      this.cleanups.push(() => svg.removeEventListener(type, fn as EventListener, opts));
    };

    on("pointerdown", (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, id: e.pointerId, moved: false };
    });
    on("pointermove", (e) => {
      if (!drag || e.pointerId !== drag.id) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      if (!drag.moved) {
        drag.moved = true;
        svg.classList.add("panning");
        try {
          svg.setPointerCapture(e.pointerId);
        } catch {
          /* synthetic events have no capturable pointer */
        }
      }
      drag.x = e.clientX;
      drag.y = e.clientY;
      this.panBy(dx, dy);
    });
    const end = (e: PointerEvent): void => {
      if (!drag || e.pointerId !== drag.id) return;
      suppressClick = drag.moved;
      drag = null;
      svg.classList.remove("panning");
    };
    on("pointerup", end);
    on("pointercancel", end);
    // The wheel scrolls the notebook, as over a map embedded in a page, until the graph is
    // engaged (clicked; a click elsewhere lets it go) or while Ctrl/Cmd is held (a trackpad's
    // pinch also comes as a wheel event with ctrlKey). A hint says how to zoom.
    const doc = this.doc;
    const release = (e: Event): void => {
      if (!svg.contains(e.target as Node | null)) this.setEngaged(false);
    };
    doc.addEventListener("pointerdown", release, true);
    this.cleanups.push(() => doc.removeEventListener("pointerdown", release, true));
    on("pointerdown", () => this.setEngaged(true));
    on(
      "wheel",
      (e) => {
        if (!this.engaged && !e.ctrlKey && !e.metaKey) {
          this.showWheelHint();
          return; // the page scrolls
        }
        e.preventDefault();
        const rect = svg.getBoundingClientRect();
        const step = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
        this.zoomBy(
          Math.min(1.25, Math.max(0.8, step)),
          e.clientX - rect.left,
          e.clientY - rect.top,
        );
      },
      { passive: false },
    );
    on("click", (e) => {
      if (suppressClick) {
        suppressClick = false;
        return;
      }
      const target = e.target as Element | null;
      const toggle = target?.closest?.("[data-testid='group-toggle']");
      if (toggle) {
        const gid = toggle.getAttribute("data-group-id");
        if (gid !== null) this.callbacks.onToggleGroup(gid);
        return;
      }
      const node = target?.closest?.("[data-testid='node']");
      if (node) {
        this.callbacks.onSelect(node.getAttribute("data-node-id"));
        return;
      }
      const group = target?.closest?.("[data-testid='group'].collapsed");
      const gid = group?.getAttribute("data-group-id");
      if (gid) this.callbacks.onToggleGroup(gid);
    });
  }
}

function ioItem(key: string, p: { row: number; col: number }, label: string, sub: string): Item {
  return { key, kind: "io", ...p, x: 0, y: 0, w: IO_W, h: IO_H, label, sub, note: "" };
}

/** Index of each line once runs of COMPACT_RUN or more empty lines are taken out. */
export function compactAxis(lines: Iterable<number>): Map<number, number> {
  const at = new Map<number, number>();
  let prev: number | undefined;
  let pos = 0;
  for (const line of [...new Set(lines)].sort((a, b) => a - b)) {
    pos = prev === undefined ? line : pos + (line - prev - 1 >= COMPACT_RUN ? 1 : line - prev);
    at.set(line, pos);
    prev = line;
  }
  return at;
}

/** An input's name and type, or only the end of a long name (a parameter's path). */
function ioText(it: Item): string {
  const full = it.sub ? `${it.label}: ${it.sub}` : it.label;
  return full.length <= IO_CHARS ? full : truncateStart(it.label, IO_CHARS);
}

/** The item's note under its box, right-aligned (none when it has no note). */
function noteElement(doc: Document, it: Item): SVGElement | null {
  if (!it.note) return null;
  return s(
    doc,
    "text",
    { class: "node-note", x: it.w, y: it.h + 12, "text-anchor": "end" },
    truncate(it.note, LABEL_CHARS + 4),
  );
}

function nodeSubtitle(node: TraceNode): string {
  const out = node.outputs[0];
  if (!out) return node.executor ?? "";
  const more = node.outputs.length > 1 ? ` +${node.outputs.length - 1}` : "";
  const type =
    out.kind === "tensor"
      ? `${formatShape(out.shape)} ${out.dtype ?? ""}`.trim()
      : (out.repr ?? out.kind);
  return `${out.name}: ${type}${more}`;
}

function outermostCollapsed(
  groups: Group[] | undefined,
  chains: Map<string, Group[]>,
  isCollapsed: (id: string) => boolean,
): Group | undefined {
  if (!groups) return undefined;
  for (const g of groups) {
    const chain = chains.get(g.id) ?? [g];
    for (let i = chain.length - 1; i >= 0; i--) {
      const c = chain[i] as Group;
      if (isCollapsed(c.id)) return c;
    }
  }
  return undefined;
}

/** A curve from the bottom of `a` to the top of `b`, with a chevron at `b`. */
function edgePathData(a: Item, b: Item): string {
  const x1 = Math.round(a.x + a.w / 2);
  const y1 = Math.round(a.y + a.h);
  const x2 = Math.round(b.x + b.w / 2);
  const y2 = Math.round(b.y);
  const dy = Math.max(24, Math.abs(y2 - y1) / 2);
  return `M${x1} ${y1}C${x1} ${y1 + dy} ${x2} ${y2 - dy} ${x2} ${y2}M${x2 - 4} ${y2 - 6}L${x2} ${y2}L${x2 + 4} ${y2 - 6}`;
}

function requestAnimationFrameSafe(fn: () => void): number {
  if (typeof requestAnimationFrame === "function") return requestAnimationFrame(fn);
  return setTimeout(fn, 16) as unknown as number;
}

function cancelAnimationFrameSafe(id: number): void {
  if (!id) return;
  if (typeof cancelAnimationFrame === "function") cancelAnimationFrame(id);
  else clearTimeout(id);
}
