/**
 * The explorer's side panels as pure functions from document data to elements: node details,
 * diff summary, runs table, executor toggles, error box.
 *
 * Layer: front-end core; imports the schema types and the safe DOM helpers. Every document
 * string goes through `h(...)` children, i.e. becomes a text node.
 */
import { breakable, formatMs, formatShape, h } from "./dom";
import type { Overlap } from "./collectives";
import { executorClass } from "./graph-elements";
import type {
  Diff,
  ErrorInfo,
  ExecutorsInfo,
  Run,
  Step,
  TraceNode,
  UserFrame,
  ValueRef,
} from "./schema";

/** A node of another step that details can link to (lineage, origin). */
export interface NodeLink {
  stepIndex: number;
  node: TraceNode | undefined;
  id: string;
}

/** A value as a person names it: a parameter or buffer by its module path, else by its trace name. */
export function valueText(v: ValueRef): string {
  if (v.kind === "tensor") {
    const parts = [formatShape(v.shape), v.dtype ?? "", v.device ?? ""].filter((p) => p);
    return `${v.path ?? v.name}: ${parts.join(" ")}`;
  }
  return v.repr !== null && v.repr !== undefined
    ? `${v.name} = ${v.repr}`
    : `${v.name} (${v.kind})`;
}

/** `model.py:12`, or `Cell In[3], line 5` for a notebook cell, as IPython's tracebacks say. */
export function placeText(file: string, line: number): string {
  return /^Cell In\[\d+\]$/.test(file) ? `${file}, line ${line}` : `${file}:${line}`;
}

function linkList(doc: Document, links: NodeLink[]): HTMLElement {
  if (!links.length) return h(doc, "span", { class: "tx-muted" }, "—");
  return h(
    doc,
    "span",
    { class: "tx-links" },
    ...links.map((l) =>
      h(
        doc,
        "button",
        {
          type: "button",
          class: "tx-link",
          "data-testid": "lineage-link",
          "data-step-index": l.stepIndex,
          "data-node-id": l.id,
          title: `step ${l.stepIndex}`,
        },
        l.node ? `${l.node.op} (${l.id}, step ${l.stepIndex})` : `${l.id} (step ${l.stepIndex})`,
      ),
    ),
  );
}

function row(doc: Document, label: string, value: Node | string): HTMLElement {
  return h(doc, "div", { class: "tx-row" }, h(doc, "dt", {}, label), h(doc, "dd", {}, value));
}

/**
 * Everything known about a node; `lineage`/`origin`/`gradients` resolved by the explorer. A
 * backward node's `origin` is the forward ops it computes the gradient of ("gradient of");
 * `gradients` (null: no backward step) the backward ops computing a forward node's gradient.
 */
export function nodeDetails(
  doc: Document,
  node: TraceNode,
  step: Step,
  fusion: TraceNode | undefined,
  lineage: NodeLink[],
  origin: NodeLink[],
  gradients: NodeLink[] | null,
  diffLabel: string | null,
): HTMLElement[] {
  const group = node.group === null ? undefined : step.groups.find((g) => g.id === node.group);
  const values = (list: ValueRef[]): HTMLElement =>
    list.length
      ? h(
          doc,
          "ul",
          { class: "tx-values" },
          ...list.map((v) =>
            h(doc, "li", v.path ? { title: v.name } : {}, breakable(doc, valueText(v))),
          ),
        )
      : h(doc, "span", { class: "tx-muted" }, "none");
  const place = (p: UserFrame): HTMLElement =>
    h(
      doc,
      "span",
      {},
      h(doc, "span", { class: "tx-file" }, placeText(p.file, p.line)),
      ` in ${p.function}`,
      p.code ? h(doc, "code", { class: "tx-code" }, p.code) : null,
    );
  const src = node.source;
  // An op inside torch (an nn.Module's forward) shows the user's line that called it, then its
  // module and torch's own line.
  const userLine = src?.call_site ?? src;
  const rows: HTMLElement[] = [
    // the graph names ops as the user wrote them; the symbol that runs is here (Note [Node labels])
    row(doc, "symbol", h(doc, "code", { "data-testid": "node-symbol" }, breakable(doc, node.op))),
    row(
      doc,
      "executor",
      h(
        doc,
        "span",
        { class: `tx-exec ${executorClass(node.executor)}` },
        node.executor ?? "not assigned yet",
      ),
    ),
    row(doc, "inputs", values(node.inputs)),
    row(doc, "outputs", values(node.outputs)),
    row(
      doc,
      "user source",
      userLine ? place(userLine) : h(doc, "span", { class: "tx-muted" }, "not from user code"),
    ),
  ];
  if (src?.module_path) rows.push(row(doc, "module", breakable(doc, src.module_path)));
  if (src?.call_site) rows.push(row(doc, "torch source", place(src)));
  if (fusion) rows.push(row(doc, "runs in", `${fusion.op} (${fusion.id})`));
  if (group)
    rows.push(row(doc, "group", breakable(doc, `${group.label || group.id} (${group.kind})`)));
  if (diffLabel) rows.push(row(doc, "change", diffLabel));
  rows.push(row(doc, "made from", linkList(doc, lineage)));
  rows.push(
    row(doc, step.kind === "backward" ? "gradient of" : "original op", linkList(doc, origin)),
  );
  if (gradients) rows.push(row(doc, "gradient computed by", linkList(doc, gradients)));
  rows.push(row(doc, "id", `${node.id} (uid ${node.uid})`));
  const out: HTMLElement[] = [
    h(
      doc,
      "h3",
      { class: "tx-details-title" },
      breakable(doc, node.label || node.op),
      h(doc, "span", { class: "tx-muted" }, ` line ${node.line ?? "?"}`),
    ),
    h(doc, "dl", { class: "tx-dl" }, ...rows),
  ];
  if (node.decomposition.length) {
    out.push(
      h(doc, "h4", {}, "decomposition"),
      h(doc, "pre", { class: "tx-decomposition" }, node.decomposition.join("\n")),
    );
  }
  return out;
}

/** A value as the diff names it: a parameter by its module path, else its trace name. */
function valueName(v: ValueRef): string {
  return v.path ?? v.name;
}

/** `add → t3`: a node by its op and the values it makes (node ids mean nothing to a reader). */
export function nodeText(n: TraceNode): string {
  const names = n.outputs.slice(0, 3).map(valueName);
  if (n.outputs.length > 3) names.push("…");
  return names.length ? `${n.label || n.op} → ${names.join(", ")}` : n.label || n.op;
}

/** At most this many entries per diff list are drawn (a pass may remove thousands). */
const DIFF_LIST_MAX = 200;

/**
 * A button the explorer follows to select node `id` of `step` (named by step id; not
 * `data-node-id`, which the graph's nodes answer to).
 */
function diffLink(doc: Document, step: Step, id: string, text: string): HTMLElement {
  return h(
    doc,
    "button",
    {
      type: "button",
      class: "tx-diff-link",
      "data-testid": "diff-link",
      "data-link-step": step.id,
      "data-link-node": id,
      title: `step ${step.index}`,
    },
    text,
  );
}

/**
 * The changes against the previous step: counts, then lists that name each node by its values:
 * removed nodes (from `previous`; a CSE-merged one names the value that replaced it), added
 * ones, and the ops each fusion absorbed (from `current`, pointing at their fusion).
 */
export function diffSummary(
  doc: Document,
  diff: Diff | null,
  previous: Step | undefined,
  current: Step,
  listsOpen = false,
): HTMLElement {
  const el = h(doc, "div", { class: "tx-diff", "data-testid": "diff-summary" });
  if (!diff) {
    el.append(h(doc, "span", { class: "tx-muted" }, "first step of its kind: nothing to compare"));
    return el;
  }
  const fusedCount = Object.keys(diff.fused).length;
  const chip = (cls: string, text: string): HTMLElement =>
    h(doc, "span", { class: `tx-chip ${cls}` }, text);
  const chips = [
    diff.added.length ? chip("diff-added", `+${diff.added.length} added`) : null,
    diff.removed.length ? chip("diff-removed", `−${diff.removed.length} removed`) : null,
    diff.rewritten.length ? chip("diff-rewritten", `~${diff.rewritten.length} rewritten`) : null,
    fusedCount ? chip("diff-fused", `${fusedCount} fusion${fusedCount === 1 ? "" : "s"}`) : null,
  ].filter((c): c is HTMLElement => c !== null);
  el.append(
    h(
      doc,
      "span",
      { class: "tx-muted" },
      `vs ${previous ? `step ${previous.index} (${previous.pass})` : diff.previous}: `,
    ),
    ...(chips.length ? chips : [h(doc, "span", {}, "no change")]),
    h(doc, "span", { class: "tx-muted" }, ` ${diff.unchanged} unchanged`),
  );

  const before = new Map(previous?.nodes.map((n) => [n.id, n]));
  const now = new Map(current.nodes.map((n) => [n.id, n]));
  /** What replaced a merged node: the kept node's values, or the step input `input:x`. */
  const mergedInto = (kept: string): HTMLElement | string => {
    const n = now.get(kept);
    if (!n) return kept.startsWith("input:") ? kept.slice("input:".length) : kept;
    const names = n.outputs.map(valueName).join(", ") || n.label || n.op;
    return diffLink(doc, current, kept, names);
  };
  const removed = diff.removed.map((id) => {
    const n = before.get(id);
    const kept = diff.merged[id];
    return [
      n && previous ? diffLink(doc, previous, id, nodeText(n)) : id,
      kept === undefined ? null : h(doc, "span", { class: "tx-muted" }, " merged into "),
      kept === undefined ? null : mergedInto(kept),
    ];
  });
  const added = diff.added.map((id) => {
    const n = now.get(id);
    return [n ? diffLink(doc, current, id, nodeText(n)) : id];
  });
  const fused = Object.entries(diff.fused).flatMap(([fid, members]) => {
    const fusion = now.get(fid);
    const name = fusion ? fusion.label || fusion.op : fid;
    return members.map((id) => {
      const n = now.get(id) ?? before.get(id);
      const text = `${n ? nodeText(n) : id} fused into ${name}`;
      return [fusion ? diffLink(doc, current, fid, text) : text];
    });
  });
  const list = (testid: string, title: string, entries: (HTMLElement | string | null)[][]) => {
    if (!entries.length) return null;
    const more = entries.length - DIFF_LIST_MAX;
    return h(
      doc,
      "section",
      { class: `tx-diff-list ${testid}`, "data-testid": testid },
      h(doc, "h5", {}, `${title} (${entries.length})`),
      h(
        doc,
        "ul",
        {},
        ...entries.slice(0, DIFF_LIST_MAX).map((parts) => h(doc, "li", {}, ...parts)),
        more > 0 ? h(doc, "li", { class: "tx-muted" }, `and ${more} more`) : null,
      ),
    );
  };
  const lists = [
    list("diff-removed", "removed", removed),
    list("diff-added", "added", added),
    list("diff-fused", "fused", fused),
  ];
  if (lists.some((l) => l !== null)) {
    el.append(
      h(
        doc,
        "button",
        { type: "button", class: "tx-diff-toggle", "data-testid": "diff-toggle" },
        "",
      ),
      h(doc, "div", { class: "tx-diff-lists" }, ...lists),
    );
    setDiffListsOpen(el, listsOpen);
  }
  return el;
}

/** Opens or closes a diff summary's lists (they lie over the graph's top). */
export function setDiffListsOpen(summary: Element, open: boolean): void {
  summary.classList.toggle("open", open);
  const toggle = summary.querySelector("[data-testid='diff-toggle']");
  if (!toggle) return;
  toggle.setAttribute("aria-expanded", String(open));
  toggle.textContent = open ? "hide lists ▴" : "show lists ▾";
}

function formatDiff(v: number | null): string {
  if (v === null) return "n/a";
  if (v === 0) return "0";
  return Math.abs(v) < 1e-3 || Math.abs(v) >= 1e4 ? v.toExponential(2) : v.toPrecision(3);
}

/** "3 compiled, 1 warming up": how many fusions stood where when the run ended; each fusion's
 * whole status (why one stayed uncompiled) in the tooltip. A run timed while regions were still
 * warming up or compiling ran torch's kernels there, and says so. */
function fusionsCell(doc: Document, r: Run): HTMLElement {
  const counts = new Map<string, number>();
  for (const f of r.fusions) {
    const kind = f.status.split(":", 1)[0] ?? f.status;
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  const text = [...counts].map(([kind, n]) => `${n} ${kind}`).join(", ");
  const title = r.fusions.map((f) => `${f.name}: ${f.status}`).join("\n");
  return h(doc, "td", { "data-field": "fusions", title: title || null }, text || "–");
}

/** The runs, oldest first, with what the user looks for first (does it match eager, by how much)
 * right after the run's name, so the whole row fits a notebook cell without scrolling. */
/** The runs table's Profile action: absent where there is no kernel to profile in. */
export interface ProfileAction {
  enabled: boolean;
  busy: boolean;
  onProfile(): void;
}

export function runsTable(
  doc: Document,
  runs: Run[],
  profile: ProfileAction | null = null,
): HTMLElement {
  const cell = (field: string, text: string, cls = "", title: string | null = null): HTMLElement =>
    h(doc, "td", { "data-field": field, class: cls || null, title }, text);
  const tolerance = (r: Run): string | null => (r.tolerance ? `tolerance: ${r.tolerance}` : null);
  const matches = (r: Run): string =>
    r.matches_eager === null
      ? (r.not_comparable ?? "–")
      : r.matches_eager
        ? "yes"
        : r.differs_at
          ? `NO (${r.differs_at})`
          : "NO";
  const body = h(
    doc,
    "tbody",
    {},
    ...runs.map((r, i) =>
      h(
        doc,
        "tr",
        {
          "data-testid": "run",
          "data-run-id": r.id,
          class: i === runs.length - 1 ? "latest" : null,
        },
        cell("id", r.first_call ? `${r.id} (first call)` : r.id),
        cell(
          "matches_eager",
          matches(r),
          r.matches_eager === false ? "tx-bad" : r.not_comparable ? "tx-warn" : "",
          r.not_comparable
            ? "eager and the compiled call ran from the same random state, and one of them gave other values when run again from it"
            : tolerance(r),
        ),
        r.first_call
          ? cell(
              "max_abs_diff",
              "not compared",
              "",
              "comparing with eager would run the program a second time: rerun to compare",
            )
          : cell("max_abs_diff", formatDiff(r.max_abs_diff), "", tolerance(r)),
        r.first_call
          ? cell(
              "median_ms",
              r.median_ms === null ? "–" : `${formatMs(r.median_ms)} (1 call)`,
              "",
              "the call that compiled: its time includes tracing and compiling",
            )
          : cell("median_ms", r.median_ms === null ? "–" : formatMs(r.median_ms)),
        cell("compile_ms", r.compile_ms === null ? "–" : formatMs(r.compile_ms)),
        cell("executors", r.executors.join(", ")),
        cell("cache_hits", String(r.cache_hits)),
        cell("cache_misses", String(r.cache_misses)),
        fusionsCell(doc, r),
        cell(
          "error",
          r.error ? `${r.error.type}: ${r.error.message}` : "",
          r.error ? "tx-bad" : "",
        ),
      ),
    ),
  );
  const head = h(
    doc,
    "thead",
    {},
    h(
      doc,
      "tr",
      {},
      ...[
        ["run", null],
        ["matches eager", null],
        ["max |Δ|", "the largest absolute difference from eager PyTorch's outputs"],
        ["median", null],
        ["compile", null],
        ["executors", null],
        ["hits", "cache hits"],
        ["misses", "cache misses"],
        ["fusions", null],
        ["error", null],
      ].map(([t, title]) => h(doc, "th", { scope: "col", title }, t)),
    ),
  );
  return h(
    doc,
    "table",
    { class: "tx-runs", "data-testid": "runs" },
    h(
      doc,
      "caption",
      {},
      runs.length ? "Runs (oldest first)" : "Runs: none yet",
      profile ? profileButton(doc, profile) : null,
    ),
    head,
    body,
  );
}

export interface ExecutorPanelState {
  info: ExecutorsInfo | null;
  interactive: boolean;
  reason: string;
  pending: Set<string>;
  busy: boolean;
  /** The document has a profile: its steps are coloured by time share. */
  profiled?: boolean;
}

/** Executor toggles (which double as the colour legend) and the rerun button. */
export function executorsPanel(
  doc: Document,
  st: ExecutorPanelState,
  onToggle: (name: string, on: boolean) => void,
  onRerun: () => void,
): HTMLElement {
  const available = st.info?.available ?? [];
  const always = new Set(st.info?.always ?? []);
  const unavailable = st.info?.unavailable ?? {};
  const toggles = available.map((name) => {
    const why = Object.prototype.hasOwnProperty.call(unavailable, name) ? unavailable[name]! : null;
    const box = h(doc, "input", {
      type: "checkbox",
      "data-testid": "executor-toggle",
      "data-executor": name,
      checked: st.pending.has(name),
      disabled: !st.interactive || always.has(name) || st.busy || why !== null,
      title: always.has(name) ? "always on" : why !== null ? `unavailable: ${why}` : null,
    });
    box.checked = st.pending.has(name);
    box.addEventListener("change", () => onToggle(name, box.checked));
    return h(
      doc,
      "label",
      { class: why === null ? "tx-toggle" : "tx-toggle tx-unavailable", title: why },
      box,
      h(doc, "span", { class: `tx-swatch ${executorClass(name)}` }),
      name,
      always.has(name) ? h(doc, "span", { class: "tx-muted" }, " (always)") : null,
      why !== null ? h(doc, "span", { class: "tx-muted" }, " (unavailable)") : null,
    );
  });
  const button = h(
    doc,
    "button",
    {
      type: "button",
      class: "tx-rerun",
      "data-testid": "rerun",
      disabled: !st.interactive || st.busy,
    },
    st.busy ? "Running…" : "Recompile & rerun",
  );
  button.addEventListener("click", onRerun);
  return h(
    doc,
    "section",
    { class: "tx-executors", "aria-label": "executors" },
    h(doc, "div", { class: "tx-executors-head" }, h(doc, "h4", {}, "Executors"), button),
    h(doc, "div", { class: "tx-toggles" }, ...toggles),
    h(
      doc,
      "div",
      { class: "tx-legend", "data-testid": "legend" },
      "node colour = executor; ",
      h(doc, "span", { class: "tx-swatch exec-none" }),
      "unassigned",
      st.profiled
        ? "; in a profiled step: fill = share of its time (pale → red), band = executor"
        : "",
    ),
    st.interactive
      ? null
      : h(doc, "p", { class: "tx-unavailable", "data-testid": "executors-unavailable" }, st.reason),
  );
}

/** A failure as the user needs it: what, where in their code, and how far compilation got. */
export function errorBox(doc: Document, err: ErrorInfo, stepsDone: number): HTMLElement {
  const frame = err.user_frame;
  return h(
    doc,
    "div",
    { class: "tx-error", "data-testid": "error", role: "alert" },
    h(
      doc,
      "div",
      { class: "tx-error-title" },
      h(doc, "strong", {}, err.type),
      ` while ${err.stage}`,
    ),
    h(doc, "div", { class: "tx-error-message" }, err.message),
    frame
      ? h(
          doc,
          "div",
          { class: "tx-error-frame" },
          h(doc, "span", { class: "tx-file" }, placeText(frame.file, frame.line)),
          ` in ${frame.function}`,
          frame.code ? h(doc, "code", { class: "tx-code" }, frame.code) : null,
        )
      : null,
    h(
      doc,
      "div",
      { class: "tx-muted" },
      `${stepsDone} step${stepsDone === 1 ? "" : "s"} completed before the failure.`,
    ),
  );
}

/** Shown instead of the explorer when the document cannot be read. */
export function invalidBox(
  doc: Document,
  errors: string[],
  title = "This trace document cannot be shown",
): HTMLElement {
  return h(
    doc,
    "div",
    { class: "tx-error tx-invalid", "data-testid": "error", role: "alert" },
    h(doc, "div", { class: "tx-error-title" }, h(doc, "strong", {}, title)),
    h(doc, "ul", {}, ...errors.map((e) => h(doc, "li", {}, e))),
  );
}

function profileButton(doc: Document, action: ProfileAction): HTMLElement {
  const button = h(
    doc,
    "button",
    {
      type: "button",
      class: "tx-profile-button",
      "data-testid": "profile-run",
      disabled: !action.enabled || action.busy,
      title:
        "run the compiled function a few times under torch's profiler: time and memory per node, module times beside eager's",
    },
    action.busy ? "Profiling…" : "Profile",
  );
  button.addEventListener("click", () => action.onProfile());
  return button;
}

/**
 * The details of a collective or its wait: which collective, where it is waited for, and the
 * compute that runs in between (links select them); the graph marks the same nodes.
 */
export function overlapDetails(
  doc: Document,
  o: Overlap | undefined,
  nodes: Map<string, TraceNode>,
  stepIndex: number,
): HTMLElement[] {
  if (!o) return [];
  const link = (id: string): HTMLElement => {
    const n = nodes.get(id);
    return h(
      doc,
      "button",
      {
        type: "button",
        class: "tx-link",
        "data-testid": "lineage-link",
        "data-step-index": stepIndex,
        "data-node-id": id,
      },
      n ? nodeText(n) : id,
    );
  };
  const c = nodes.get(o.collective);
  const what = c ? `${nodeText(c)} (${o.collective})` : o.collective;
  const text =
    o.wait === null
      ? `${what} is not waited for in this step.`
      : o.compute.length
        ? `While ${what} is in flight, ${o.compute.length} op${o.compute.length === 1 ? "" : "s"} run before its wait: they hide the communication.`
        : `Nothing runs while ${what} is in flight: its wait follows the collective at once (no overlap).`;
  const shown = o.compute.slice(0, 12);
  return [
    h(
      doc,
      "section",
      { class: "tx-overlap", "data-testid": "overlap" },
      h(doc, "h4", {}, "Communication"),
      h(doc, "p", {}, text),
      h(
        doc,
        "p",
        {},
        "collective ",
        link(o.collective),
        ...(o.wait === null ? [] : [" · wait ", link(o.wait)]),
      ),
      shown.length
        ? h(
            doc,
            "p",
            { class: "tx-overlap-compute" },
            "overlapping: ",
            ...shown.flatMap((id, i) => (i ? [", ", link(id)] : [link(id)])),
            o.compute.length > shown.length ? ` and ${o.compute.length - shown.length} more` : "",
          )
        : null,
    ),
  ];
}
