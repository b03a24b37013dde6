/**
 * Where everything of one step's graph is drawn (no DOM): which nodes stand for which (collapsed
 * groups and fusions), where each item sits once empty rows and columns are compacted, the boxes
 * of expanded groups with their labels, and the edges between what is drawn.
 *
 * Layer: front-end core, pure; imports the schema types, the layout's output and what scopes.ts
 * makes of a step's scopes. graph-view.ts draws the scene and handles pan, zoom and clicks.
 */
import { counted, formatMs, formatShape, truncate, truncateStart } from "./dom";
import { OUTPUT_ID, type StepLayout } from "./layout";
import type { StepProfile } from "./profile-view";
import type { Group, Step, TraceNode, ValueRef } from "./schema";
import type { DelNote, ScopeStats } from "./scopes";

export const NODE_W = 168;
export const NODE_H = 44;
const COL_W = 200;
const ROW_H = 84;
/** An input's pill: its label's IO_CHARS (graph-elements.ts) monospace characters of 11 px (6.6 px
 * each in DejaVu Sans Mono) fit inside it (at 128 px the last of 22 crossed its edge). */
const IO_W = 160;
const IO_H = 26;
/** Note [Scope labels]: a label's band, the padding of a box around its members, the room kept
 * between a label and the nodes above, where the label text starts, and a wide character's width. */
const LABEL_H = 16;
const BOX_PAD = 6;
/** The room a note takes under its item (`noteElement` in graph-elements.ts: 10 px text, baseline 12 px below). */
const NOTE_H = 14;
const LABEL_GAP = 2;
export const LABEL_X = 24;
const LABEL_CHAR_W = 7;
const MAX_GROUP_DEPTH = 32;
/** A collapsed item hiding more step inputs than this draws them inside it (a count). */
const MAX_BESIDE = 3;
/** Runs of this many empty rows or columns are taken out (Note [Compaction]). */
const COMPACT_RUN = 2;

export interface Item {
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
  /** A collapsed group's measured time (its nodes' sum), when the step was profiled. */
  ms?: number | null;
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

/** A group box's whole label (its tooltip); `groupLabelText` is what fits the box. */
export function groupLabelFull(
  group: Group,
  collapsed: boolean,
  note: string | null = null,
): string {
  return collapsed
    ? `${group.kind} · ${counted(group.nodes.length - 1, "op")}`
    : `${group.label || group.id} (${group.kind})${note ? ` · ${note}` : ""}`;
}

/**
 * A group box's label as drawn: cut to the box's width. The note (a module's measured time) is
 * what a narrow box must still show, so the name gives way first: its kind, then its start (a
 * module path's last parts say most, as on a collapsed box).
 */
export function groupLabelText(
  group: Group,
  collapsed: boolean,
  width: number,
  note: string | null = null,
): string {
  const max = Math.max(8, Math.floor((width - LABEL_X) / LABEL_CHAR_W));
  const full = groupLabelFull(group, collapsed, note);
  if (full.length <= max || collapsed) return truncate(full, max);
  const name = group.label || group.id;
  const tail = note ? ` · ${note}` : "";
  if (name.length + tail.length <= max) return `${name}${tail}`;
  return max - tail.length >= 6
    ? `${truncateStart(name, max - tail.length)}${tail}`
    : truncate(note ?? name, max);
}

/** How far a box's label reaches from the box's left edge (toggle and text). */
function groupLabelWidth(
  group: Group,
  collapsed: boolean,
  width: number,
  note: string | null,
): number {
  return LABEL_X + groupLabelText(group, collapsed, width, note).length * LABEL_CHAR_W + 4;
}

export interface GroupBox {
  group: Group;
  /** A collapsed fusion's frame around its fusion node. */
  collapsed: boolean;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface GraphState {
  step: Step;
  layout: StepLayout;
  isCollapsed(groupId: string): boolean;
  /** node id -> diff class (`diff-added`, `diff-rewritten`, `diff-fused`). */
  diffClass: Map<string, string>;
  /** The profile of this step, when it was profiled (profile-view.ts). */
  profile?: StepProfile | null;
  /** What an expanded group's label adds (a module's profiled time). */
  groupNote?(group: Group): string | null;
}

/** What is drawn for one step with its groups collapsed as `state` says. */
export interface Scene {
  items: Item[];
  itemByKey: Map<string, Item>;
  /** node, input or output id -> the key of the item standing for it */
  repOf: Map<string, string>;
  edges: [Item, Item][];
  /** big ones first, so inner boxes are drawn on top */
  boxes: GroupBox[];
}

export function buildScene(
  state: GraphState,
  chains: Map<string, Group[]>,
  stats: Map<string, ScopeStats>,
  notes: Map<string, DelNote>,
): Scene {
  const { step, layout, isCollapsed } = state;
  const note = (g: Group): string | null => state.groupNote?.(g) ?? null;
  const cell = new Map<string, { row: number; col: number }>();
  layout.ids.forEach((id, i) => {
    cell.set(id, { row: layout.layer[i] as number, col: layout.col[i] as number });
  });

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
        const st = stats.get(collapsedGroup.id);
        const executors = st?.executors.length ? ` · ${st.executors.join(", ")}` : "";
        const time = st?.ms !== null && st?.ms !== undefined ? ` · ${formatMs(st.ms)}` : "";
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
          sub: `${counted(st?.ops ?? 0, "op")}${time || executors}`,
          ms: st?.ms ?? null,
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
    const freed = notes.get(node.id);
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
    const type = input.kind === "tensor" ? tensorType(input) : (input.dtype ?? "");
    ios.push(ioItem(id, p, input.name, type));
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
    const [a, b] = [
      sp.x0,
      sp.x0 + groupLabelWidth(sp.group, sp.collapsed, sp.x1 - sp.x0, note(sp.group)),
    ];
    while ((taken.get(`${sp.top} ${slot}`) ?? []).some(([p, q]) => a < q && p < b)) slot++;
    sp.slot = slot;
    const key = `${sp.top} ${slot}`;
    taken.set(key, [...(taken.get(key) ?? []), [a, b]]);
    slotsAbove.set(sp.top, Math.max(slotsAbove.get(sp.top) ?? 0, slot + 1));
  }
  // each row's top: the rows above, and the label slots of the gaps above it
  // (and a box's bottom goes under the notes of its members, so the row below leaves room for them)
  const rows = Math.max(0, ...[...rowOf.values()].map((r) => r + 1));
  const notedInBox = new Set<number>();
  for (const sp of spans)
    for (const it of sp.members) if (it.note) notedInBox.add(rowOf.get(it) as number);
  const rowY: number[] = [];
  let grown = 0;
  for (let r = 0; r < rows; r++) {
    const notes = notedInBox.has(r - 1) ? NOTE_H + BOX_PAD : 0;
    const need = (slotsAbove.get(r) ?? 0) * LABEL_H + BOX_PAD + LABEL_GAP + notes;
    grown += Math.max(0, need - (ROW_H - NODE_H));
    rowY.push(r * ROW_H + grown);
  }
  for (const it of items)
    it.y = (rowY[rowOf.get(it) as number] as number) + (it.kind === "io" ? (NODE_H - IO_H) / 2 : 0);

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
    for (const it of sp.members) y = Math.max(y, it.y + it.h + (it.note ? NOTE_H : 0));
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
  return { items, itemByKey, repOf, edges, boxes };
}

/** The rectangle holding every item, with a margin. */
export function sceneBounds(
  items: Item[],
): { x0: number; y0: number; x1: number; y1: number } | null {
  if (!items.length) return null;
  let x0 = Infinity,
    y0 = Infinity,
    x1 = -Infinity,
    y1 = -Infinity;
  for (const it of items) {
    x0 = Math.min(x0, it.x);
    y0 = Math.min(y0, it.y);
    x1 = Math.max(x1, it.x + it.w);
    y1 = Math.max(y1, it.y + it.h);
  }
  return { x0: x0 - 30, y0: y0 - 30, x1: x1 + 30, y1: y1 + 30 };
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

/**
 * A tensor's shape and dtype as a box shows them: `2×3 f32`; with a symbolic size (no `shape`),
 * its printed type less the device, `f32[1, 2, (keys_2 + 1), 16]`, so the size any value runs
 * is not lost.
 */
function tensorType(v: ValueRef): string {
  if (v.shape === null && v.repr) return v.repr.replace(/^\S+ (?=\S+\[)/, "");
  return `${formatShape(v.shape)} ${v.dtype ?? ""}`.trim();
}

function nodeSubtitle(node: TraceNode): string {
  const out = node.outputs[0];
  if (!out) return node.executor ?? "";
  const more = node.outputs.length > 1 ? ` +${node.outputs.length - 1}` : "";
  const type = out.kind === "tensor" ? tensorType(out) : (out.repr ?? out.kind);
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
export function edgePathData(a: Item, b: Item): string {
  const x1 = Math.round(a.x + a.w / 2);
  const y1 = Math.round(a.y + a.h);
  const x2 = Math.round(b.x + b.w / 2);
  const y2 = Math.round(b.y);
  const dy = Math.max(24, Math.abs(y2 - y1) / 2);
  return `M${x1} ${y1}C${x1} ${y1 + dy} ${x2} ${y2 - dy} ${x2} ${y2}M${x2 - 4} ${y2 - 6}L${x2} ${y2}L${x2 + 4} ${y2 - 6}`;
}
