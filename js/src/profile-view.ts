/**
 * Where time and memory go (the document's `profile`, made by `thunder_viz.profile`): each node's
 * measured cost in the shown step, the heat class that colours the graph by time share, the panel
 * listing the costliest nodes with their source lines, the module comparison with eager, and the
 * timeline of the bytes saved for backward that the backward still reads.
 *
 * Layer: front-end core; imports the schema types and the safe DOM helpers. All document text is
 * set as text.
 */
import { formatMs, h, s, truncate } from "./dom";
import type { ModuleCost, NodeCost, Profile, SavedTimeline, Step, TraceNode } from "./schema";

/** Nodes listed in the panel. */
const TOP_N = 12;
/** Time shares (of the step's measured total) at which a node turns one heat level hotter. */
const HEAT_STEPS = [0.005, 0.02, 0.05, 0.1, 0.2];

/** The profile as the shown step sees it. */
export interface StepProfile {
  profile: Profile;
  costs: Map<string, NodeCost>;
  total: number;
  /** module path -> its costs (thunder forward and backward, eager forward) */
  modules: Map<string, ModuleCost>;
}

export function stepProfile(profile: Profile | null, step: Step | undefined): StepProfile | null {
  const costs = profile && step ? profile.steps[step.id] : undefined;
  if (!profile || !costs) return null;
  return {
    profile,
    costs: new Map(Object.entries(costs.nodes)),
    total: costs.total_ms,
    modules: new Map(profile.modules.map((m) => [m.path, m])),
  };
}

/** `heat-0` (under half a percent of the step's time) to `heat-5` (a fifth or more). */
export function heatClass(ms: number, total: number): string {
  const share = total > 0 ? ms / total : 0;
  let level = 0;
  for (const t of HEAT_STEPS) if (share >= t) level++;
  return `heat-${level}`;
}

export function formatBytes(b: number): string {
  const a = Math.abs(b);
  const sign = b < 0 ? "−" : "";
  if (a >= 2 ** 30) return `${sign}${(a / 2 ** 30).toFixed(2)} GB`;
  if (a >= 2 ** 20) return `${sign}${(a / 2 ** 20).toFixed(1)} MB`;
  if (a >= 2 ** 10) return `${sign}${(a / 2 ** 10).toFixed(1)} KB`;
  return `${sign}${a} B`;
}

function share(ms: number, total: number): string {
  return total > 0 ? `${((100 * ms) / total).toFixed(1)}%` : "–";
}

/** The details' line on a profiled node: its time, share and memory per call. */
export function nodeCostLine(
  doc: Document,
  sp: StepProfile | null,
  node: TraceNode,
): HTMLElement[] {
  const c = sp?.costs.get(node.id);
  if (!sp || !c) return [];
  // a fusion still warming up when the calls began ran torch's kernels, not its compiled code
  const status = node.fusion ? sp.profile.uncompiled[node.op] : undefined;
  const text = `Profiled: ${formatMs(c.ms)} per call (${share(c.ms, sp.total)} of this step), ${formatBytes(c.bytes)} left allocated`;
  return [
    h(
      doc,
      "p",
      { class: status ? "tx-warn" : "tx-muted", "data-testid": "node-cost" },
      status
        ? `${text}; not compiled when the calls began (${status}): torch's kernels' time`
        : text,
    ),
  ];
}

/**
 * A module's time under thunder, as text: its statements' time, and the fusions it shares with other
 * modules, whose time counts in an enclosing scope (Note [A fusion across modules] in
 * thunder_viz/profile.py): "in TorchCompile2", "0.30 ms + part of TorchCompile1".
 */
export function moduleTime(m: ModuleCost, backward: boolean): string {
  const ms = backward ? m.backward_ms : m.ms;
  const shared = backward ? m.backward_shared : m.shared;
  if (!shared.length) return formatMs(ms);
  const fusions = shared.join(", ");
  return ms > 0 ? `${formatMs(ms)} + part of ${fusions}` : `in ${fusions}`;
}

/** Whether a module's time under thunder is all of it (none of its ops runs in a fusion shared with other modules). */
function whole(m: ModuleCost, backward: boolean): boolean {
  return !(backward ? m.backward_shared : m.shared).length;
}

/** What a module scope's label adds: its time here and eager's time of the same module. */
export function moduleCostText(sp: StepProfile, path: string, backward: boolean): string | null {
  const m = sp.modules.get(path);
  if (!m) return null;
  const eagerMs = backward ? m.eager_backward_ms : m.eager_ms;
  const eager = eagerMs !== null ? ` · eager ${formatMs(eagerMs)}` : "";
  return `${moduleTime(m, backward)}${eager}`;
}

/**
 * The profile panel: what was measured, then the costliest nodes of the shown step (a button
 * each: the explorer selects the node), then the modules beside eager's.
 */
export function profilePanel(
  doc: Document,
  sp: StepProfile | null,
  profile: Profile | null,
  step: Step | undefined,
  nodes: Map<string, TraceNode>,
): HTMLElement | null {
  if (!profile) return null;
  const p = profile;
  const where = p.backward ? "forward and backward" : "forward";
  const eager = p.eager_call_ms === null ? "" : ` · eager ${formatMs(p.eager_call_ms)}`;
  const summary = h(
    doc,
    "p",
    { class: "tx-profile-summary", "data-testid": "profile-summary" },
    `${p.calls} calls (${where}, ${p.device}): ${formatMs(p.call_ms)} per call${eager}; ` +
      `${formatMs(p.attributed_ms)} in the traces' statements` +
      // medians of each statement can add up to more than the median call: then there is no "rest"
      (p.attributed_ms < p.call_ms ? ", the rest in the prologue, autograd and Python." : "."),
  );
  // how it was measured: rounds of alternated calls, medians and ranges, a warning when the load changed
  const measured = p.measured
    ? h(
        doc,
        "p",
        {
          class:
            p.unsteady || Object.keys(p.uncompiled).length
              ? "tx-profile-measured tx-warn"
              : "tx-profile-measured",
          "data-testid": "profile-measured",
        },
        p.measured,
      )
    : null;
  const parts: (HTMLElement | null)[] = [h(doc, "h4", {}, "Profile"), summary, measured];
  if (!sp || !step) {
    parts.push(
      h(
        doc,
        "p",
        { class: "tx-muted" },
        "Measured on the last forward and backward steps (the traces that ran): open one of them.",
      ),
    );
    return h(doc, "section", { class: "tx-profile", "data-testid": "profile" }, ...parts);
  }
  // nodes not drawn (bookkeeping folded away) count in the totals, not in the list
  const ranked = [...sp.costs]
    .filter(([id]) => nodes.has(id))
    .sort((a, b) => b[1].ms - a[1].ms)
    .slice(0, TOP_N);
  const rows = ranked.map(([id, c]) => {
    const n = nodes.get(id);
    const src = n?.source;
    const where = src ? `${src.file.split("/").pop() ?? src.file}:${src.line}` : "";
    return h(
      doc,
      "tr",
      { "data-testid": "profile-row", "data-node-id": id },
      h(doc, "td", { class: "tx-num" }, formatMs(c.ms)),
      h(doc, "td", { class: "tx-num" }, share(c.ms, sp.total)),
      h(doc, "td", { class: "tx-num" }, formatBytes(c.bytes)),
      h(
        doc,
        "td",
        {},
        h(
          doc,
          "button",
          { type: "button", class: "tx-link", "data-testid": "profile-node", "data-node-id": id },
          truncate(n ? n.label || n.op : id, 28),
        ),
      ),
      h(doc, "td", { class: "tx-profile-src", title: src?.code ?? null }, where),
    );
  });
  parts.push(
    h(
      doc,
      "table",
      { class: "tx-profile-table", "data-testid": "profile-table" },
      h(
        doc,
        "caption",
        {},
        `Costliest in this step (${formatMs(sp.total)} measured per call; colour = time share)`,
      ),
      h(
        doc,
        "thead",
        {},
        h(
          doc,
          "tr",
          {},
          ...["time", "share", "memory", "node", "source"].map((t) =>
            h(doc, "th", { scope: "col" }, t),
          ),
        ),
      ),
      h(doc, "tbody", {}, ...rows),
    ),
  );
  const backward = step.kind === "backward";
  const modules = p.modules.filter(
    (m) =>
      m.path.split(".").length <= 3 &&
      ((backward ? m.backward_ms : m.ms) > 0 || !whole(m, backward)),
  );
  if (modules.length) {
    parts.push(
      h(
        doc,
        "table",
        { class: "tx-profile-table", "data-testid": "profile-modules" },
        h(
          doc,
          "caption",
          {},
          `Modules: thunder beside eager (${backward ? "backward" : "forward"})`,
        ),
        h(
          doc,
          "thead",
          {},
          h(
            doc,
            "tr",
            {},
            ...["module", "thunder", "eager"].map((t) => h(doc, "th", { scope: "col" }, t)),
          ),
        ),
        h(
          doc,
          "tbody",
          {},
          ...modules.map((m) => {
            const ms = backward ? m.backward_ms : m.ms;
            const eager = backward ? m.eager_backward_ms : m.eager_ms;
            // part of its time counts in an enclosing scope: no ranking against eager's whole time
            const ranked = eager !== null && whole(m, backward);
            return h(
              doc,
              "tr",
              { "data-testid": "profile-module", "data-module": m.path },
              h(doc, "td", { class: "tx-profile-src" }, m.path),
              h(doc, "td", { class: "tx-num" }, moduleTime(m, backward)),
              h(
                doc,
                "td",
                {
                  class: !ranked ? "tx-num" : eager < ms ? "tx-num tx-warn" : "tx-num tx-good",
                },
                eager === null ? "–" : formatMs(eager),
              ),
            );
          }),
        ),
      ),
    );
  }
  return h(doc, "section", { class: "tx-profile", "data-testid": "profile" }, ...parts);
}

const CHART_W = 600;
const CHART_H = 56;

/**
 * Under a backward graph: the bytes of the tensors the forward saved that the backward still reads
 * from each of its statements on (a step function over the statements, in order). A click picks
 * the statement under the pointer.
 */
export function savedTimelineChart(
  doc: Document,
  saved: SavedTimeline | null,
  step: Step | undefined,
  onPick: (nodeId: string) => void,
): HTMLElement | null {
  if (!saved || !step || saved.step !== step.id || !saved.timeline.length) return null;
  const points = saved.timeline;
  const max = Math.max(1, ...points.map(([, b]) => b));
  const dx = CHART_W / points.length;
  let d = `M0 ${CHART_H}`;
  points.forEach(([, b], i) => {
    const y = CHART_H - (b / max) * (CHART_H - 4);
    d += `L${(i * dx).toFixed(1)} ${y.toFixed(1)}L${((i + 1) * dx).toFixed(1)} ${y.toFixed(1)}`;
  });
  d += `L${CHART_W} ${CHART_H}Z`;
  const svg = s(
    doc,
    "svg",
    {
      class: "tx-saved-chart",
      viewBox: `0 0 ${CHART_W} ${CHART_H}`,
      preserveAspectRatio: "none",
      role: "img",
      "aria-label": "bytes saved for backward still read, per backward statement",
    },
    s(doc, "path", { d, class: "tx-saved-area" }),
  );
  svg.addEventListener("click", (e) => {
    const rect = svg.getBoundingClientRect();
    const i = Math.floor(((e.clientX - rect.left) / Math.max(1, rect.width)) * points.length);
    const id = points[Math.min(points.length - 1, Math.max(0, i))]?.[0];
    if (id !== undefined) onPick(id);
  });
  const before =
    saved.bytes_before_remat !== null &&
    saved.bytes !== null &&
    saved.bytes_before_remat !== saved.bytes
      ? ` (${formatBytes(saved.bytes_before_remat)} before rematerialization)`
      : "";
  return h(
    doc,
    "div",
    { class: "tx-saved", "data-testid": "saved-timeline" },
    h(
      doc,
      "div",
      { class: "tx-muted" },
      `Saved for backward: ${saved.bytes === null ? "?" : formatBytes(saved.bytes)}${before}; ` +
        `the curve is what the backward still reads from each statement on (torch's autograd frees it all when the backward returns)`,
    ),
    svg,
  );
}
