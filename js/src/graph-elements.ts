/**
 * The SVG of each drawn item of a step's graph (a node, an input or output, a collapsed group,
 * a group's box with its label and toggle) and the colour class of each executor.
 *
 * Layer: front-end core; imports the schema types, the scene (graph-scene.ts) and the safe DOM
 * helpers. All document text is set as text.
 */
import { commKind } from "./collectives";
import { formatMs, s, truncate, truncateStart } from "./dom";
import { groupLabelFull, groupLabelText, LABEL_X, type GroupBox, type Item } from "./graph-scene";
import { heatClass, type StepProfile } from "./profile-view";
import type { Group, TraceNode } from "./schema";
import type { DelNote } from "./scopes";

const LABEL_CHARS = 24;
const IO_CHARS = 22;

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

/** What the items' look depends on besides the scene. */
export interface DrawContext {
  doc: Document;
  /** node id -> diff class (`diff-added`, `diff-rewritten`, `diff-fused`) */
  diffClass: Map<string, string>;
  notes: Map<string, DelNote>;
  matches: Set<string>;
  selected: string | null;
  /** The step's profile: nodes coloured by time share. */
  profile: StepProfile | null;
  groupNote(group: Group): string | null;
}

export function itemElement(ctx: DrawContext, it: Item): SVGElement {
  const doc = ctx.doc;
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
  if (it.kind === "group" && it.group) {
    const ms = it.ms ?? null;
    const heat = ms === null || !ctx.profile ? null : heatClass(ms, ctx.profile.total);
    return collapsedGroupElement(doc, it, it.group, heat);
  }
  const node = it.node as TraceNode;
  const classes = ["node", executorClass(node.executor)];
  if (node.fusion) classes.push("fusion");
  const comm = commKind(node);
  if (comm) classes.push(`comm-${comm}`);
  // a node whose `del` note this pass added shows as added: the del statements are new
  const freed = ctx.notes.get(node.id)?.dels;
  const diff =
    ctx.diffClass.get(node.id) ??
    (freed?.some((d) => ctx.diffClass.get(d) === "diff-added") ? "diff-added" : undefined);
  if (diff) classes.push(diff);
  if (ctx.matches.has(node.id)) classes.push("search-match");
  const cost = ctx.profile?.costs.get(node.id);
  if (ctx.profile) classes.push(cost ? heatClass(cost.ms, ctx.profile.total) : "heat-none");
  const sub = cost ? `${formatMs(cost.ms)} · ${it.sub}` : it.sub;
  return s(
    doc,
    "g",
    {
      class: classes.join(" "),
      "data-testid": "node",
      "data-node-id": node.id,
      transform: `translate(${it.x},${it.y})`,
      "aria-selected": node.id === ctx.selected ? "true" : null,
    },
    s(doc, "rect", {
      class: "node-box",
      width: it.w,
      height: it.h,
      rx: comm === "collective" || comm === "wait" ? it.h / 2 : 6,
    }),
    s(doc, "rect", { class: "node-band", width: 6, height: it.h, rx: 2 }),
    s(doc, "text", { class: "node-label", x: 14, y: 18 }, truncate(it.label, LABEL_CHARS)),
    s(doc, "text", { class: "node-sub", x: 14, y: 34 }, truncate(sub, LABEL_CHARS + 4)),
    noteElement(doc, it),
  );
}

function toggleElement(
  doc: Document,
  group: Group,
  collapsed: boolean,
  x: number,
  y: number,
): SVGElement {
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

function collapsedGroupElement(
  doc: Document,
  it: Item,
  group: Group,
  heat: string | null,
): SVGElement {
  const classes = ["group", "collapsed", `group-${group.kind}`];
  if (heat) classes.push(heat);
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
    s(doc, "text", { class: "node-label", x: 26, y: 18 }, truncateStart(it.label, LABEL_CHARS - 3)),
    s(doc, "text", { class: "node-sub", x: 26, y: 34 }, truncate(it.sub, LABEL_CHARS + 1)),
    toggleElement(doc, group, true, 6, 6),
    noteElement(doc, it),
  );
}

export function groupBoxElement(ctx: DrawContext, b: GroupBox): SVGElement {
  const doc = ctx.doc;
  const note = ctx.groupNote(b.group);
  return s(
    doc,
    "g",
    {
      class: `group group-${b.group.kind}${b.collapsed ? " collapsed-frame" : ""}`,
      "data-testid": "group",
      "data-group-id": b.group.id,
      transform: `translate(${b.x},${b.y})`,
      "aria-selected": b.group.node !== null && b.group.node === ctx.selected ? "true" : null,
    },
    s(doc, "title", {}, groupLabelFull(b.group, b.collapsed, note)), // the whole label, where it is cut
    s(doc, "rect", { class: "group-box", width: b.w, height: b.h, rx: 10 }),
    toggleElement(doc, b.group, b.collapsed, 6, 1),
    s(
      doc,
      "text",
      { class: "group-label", x: LABEL_X, y: 12 },
      groupLabelText(b.group, b.collapsed, b.w, note),
    ),
  );
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
