/**
 * The trace document (`application/vnd.thunder.trace+json`, version 1): TypeScript mirror of
 * docs/trace-schema.md, and a validator for it.
 *
 * Layer: front-end core, imports lazy.ts only. The document is untrusted (a saved notebook or an
 * HTML file can hold anything), so every field the explorer reads is checked before the explorer
 * sees it (`readDocument`, step bodies on first use; `validateDocument`, everything at once), and
 * the explorer renders every string as text.
 *
 * Note [Lazy steps]: a 12-layer GPT-2's document has 14 steps of 500-1,800 nodes. Unpacking,
 * checking, filtering and laying out all of them before the first render took 300-550 ms, for a
 * graph that shows one step. So `readDocument` checks the document and each step's head (id,
 * kind, pass, time) at once, and a step's body (STEP_BODY: nodes, edges, groups, source...) the
 * first time any of it is read (lazy.ts): showing a step pays for that step, and for the earlier
 * steps of its kind its packed form and its layout depend on. A body that fails its check reads
 * as an empty step whose `problems` say why; the explorer shows them in place of that step's graph.
 */
import { withLazyFields } from "./lazy";

export const MIME_TYPE = "application/vnd.thunder.trace+json";
export const SCHEMA_NAME = "thunder-trace";
export const SCHEMA_VERSION = 1;

/** Limits from docs/trace-schema.md ("Limits the front end enforces"). */
export const LIMITS = {
  maxBytes: 50 * 1024 * 1024,
  maxSteps: 200,
  maxNodesPerStep: 100_000,
} as const;

export type StepKind = "prologue" | "computation" | "backward";
export type ValueKind = "tensor" | "number" | "other";
export type GroupKind = "fusion" | "module" | "decomposition";
export type ErrorStage = "tracing" | "compiling" | "running";

/** A dimension: an int, or a string for a symbolic dimension. */
export type Dim = number | string;

export interface ValueRef {
  name: string;
  shape: Dim[] | null;
  dtype: string | null;
  device: string | null;
  kind: ValueKind;
  repr?: string | null;
  /** A parameter's or buffer's qualified name in the module (`transformer.h.0.ln_1.weight`). */
  path?: string | null;
}

/** A step input: same fields as a ValueRef. */
export type Value = ValueRef;

export interface SourceInfo {
  /** The file, or `Cell In[3]` for a notebook cell (as IPython's tracebacks name it). */
  file: string;
  line: number;
  function: string;
  module_path: string | null;
  code: string | null;
  /** For a line inside torch: the innermost line outside torch and thunder that led there. */
  call_site?: UserFrame | null;
}

export interface TraceNode {
  id: string;
  uid: number;
  op: string;
  label: string;
  executor: string | null;
  fusion: boolean;
  inputs: ValueRef[];
  outputs: ValueRef[];
  line: number | null;
  source: SourceInfo | null;
  lineage: string[];
  origin: string[];
  decomposition: string[];
  group: string | null;
  /** For a fusion member: the fusion node it runs in (members follow it in `nodes`). */
  fused_into: string | null;
}

export interface Edge {
  id: string;
  source: string;
  target: string;
  value: string;
  shape: Dim[] | null;
  dtype: string | null;
}

export interface Group {
  id: string;
  kind: GroupKind;
  label: string;
  nodes: string[];
  parent: string | null;
  collapsed: boolean;
  /** Fusion groups: the fusion node the group expands. */
  node: string | null;
}

export interface Diff {
  previous: string;
  added: string[];
  removed: string[];
  rewritten: string[];
  fused: Record<string, string[]>;
  /** Removed node -> the node (or `input:x`) now supplying its values (CSE). */
  merged: Record<string, string>;
  unchanged: number;
}

export interface Step {
  id: string;
  /** The cache entry it is of (an index of `entries.items`), in a document of several entries. */
  entry?: number;
  index: number;
  kind: StepKind;
  pass: string;
  ms: number | null;
  source: string;
  nodes: TraceNode[];
  /** Edges between top-level nodes (every fusion collapsed). */
  edges: Edge[];
  /** Every edge touching a fusion member, both ends at the finest level. */
  inner_edges: Edge[];
  groups: Group[];
  inputs: Value[];
  outputs: string[];
  diff: Diff | null;
  /** Why the step's body failed its check (Note [Lazy steps]); empty or absent when it passed. */
  problems?: string[];
}

/** The fields of a step read on its first use (Note [Lazy steps]); the others are read at once. */
export const STEP_BODY = [
  "nodes",
  "edges",
  "inner_edges",
  "groups",
  "inputs",
  "outputs",
  "source",
  "diff",
  "problems",
] as const;

export interface UserFrame {
  file: string;
  line: number;
  function: string;
  code: string | null;
}

export interface ErrorInfo {
  type: string;
  message: string;
  stage: ErrorStage;
  user_frame: UserFrame | null;
}

export interface Run {
  id: string;
  executors: string[];
  /** The call that compiled: timed once with its compilation, not compared with eager. */
  first_call: boolean;
  median_ms: number | null;
  repeats: number;
  compile_ms: number | null;
  max_abs_diff: number | null;
  matches_eager: boolean | null;
  /** The path of the first output leaf that differs from eager's (``logits``). */
  differs_at: string | null;
  /** The tolerances the comparison used, per dtype ("float32: atol 1e-05, rtol 1.3e-06"). */
  tolerance: string | null;
  /** Why values could not be compared although both ran ("random ops: values not comparable"). */
  not_comparable: string | null;
  cache_hits: number;
  cache_misses: number;
  fusions: FusionStatus[];
  error: ErrorInfo | null;
}

/** Where one fusion stood when a run ended (``thunder.examine.fusion_status``). */
export interface FusionStatus {
  name: string;
  status: string;
}

export interface ExecutorsInfo {
  available: string[];
  selected: string[];
  always: string[];
  unavailable: Record<string, string>;
  interactive: boolean;
  reason: string | null;
}

/** One node's measured cost per call. */
export interface NodeCost {
  ms: number;
  /** Left allocated by it (net: negative when it freed more than it allocated). */
  bytes: number;
}

export interface StepCosts {
  /** The sum over its nodes. */
  total_ms: number;
  nodes: Record<string, NodeCost>;
}

export interface ModuleCost {
  path: string;
  ms: number;
  backward_ms: number;
  /** Eager PyTorch's forward of the same module; null when it was not measured. */
  eager_ms: number | null;
  /** Eager PyTorch's backward of the same module; null when none ran (or an older document). */
  eager_backward_ms: number | null;
  /**
   * Fusions that run some of the module's ops beside other modules' ops (forward, backward): their
   * time counts in an enclosing scope, so `ms` is only part of the module's (Note [A fusion across
   * modules] in thunder_viz/profile.py). Empty in older documents.
   */
  shared: string[];
  backward_shared: string[];
}

export interface SavedTimeline {
  /** The backward step it is read from. */
  step: string;
  bytes: number | null;
  bytes_before_remat: number | null;
  /** [node id, bytes of saved tensors the backward still reads from that node on], in order. */
  timeline: [string, number][];
}

/** Where time and memory go (docs/trace-schema.md, "Profile"). */
export interface Profile {
  calls: number;
  device: string;
  call_ms: number;
  eager_call_ms: number | null;
  backward: boolean;
  attributed_ms: number;
  /** How the calls were measured, with both sides' medians and ranges; null in older documents. */
  measured: string | null;
  /** Whether the calls varied so much that the machine's load changed while measuring. */
  unsteady: boolean;
  /**
   * Fusions not compiled when the profiled calls began, with where they stood at the end: their times
   * are torch's kernels' (a background-compiled region warms up first). Empty in older documents.
   */
  uncompiled: Record<string, string>;
  /** By step id: the last computation and backward steps (what ran). */
  steps: Record<string, StepCosts>;
  modules: ModuleCost[];
  saved: SavedTimeline | null;
}

export interface TraceDocument {
  schema: typeof SCHEMA_NAME;
  version: typeof SCHEMA_VERSION;
  title: string;
  steps: Step[];
  runs: Run[];
  executors: ExecutorsInfo | null;
  /** Where time and memory went (thunder_viz.profile), absent until profiled. */
  profile: Profile | null;
  error: ErrorInfo | null;
  /** Why torch's autograd records the backward instead of thunder's backward traces; null when they run. */
  autograd: string | null;
  /** The cache entries when there are several (`generate`: the prefill's and the decoding steps'); else null. */
  entries: CacheEntries | null;
}

export interface CacheEntries {
  /** The entries, least recently used first. */
  items: CacheEntry[];
  /** The entry the explorer opens on (the last compiled); null when the steps are of none of them. */
  shown: number | null;
}

export interface CacheEntry {
  /** What tells it from the others: `prefill: input_ids i64[1, 8]`, `decode: …, cache length symbolic`. */
  label: string;
  /** Its tensor and number inputs as its trace prints them (the module's parameters left out). */
  inputs: string;
  symbolic: boolean;
  /** Calls that found it in the cache (the call that compiled it is not one); null in older documents. */
  hits: number | null;
  compile_ms: number | null;
  /** Whether the document carries its steps (the steps whose `entry` is its index). */
  steps: boolean;
}

export type ValidationResult = { ok: true; doc: TraceDocument } | { ok: false; errors: string[] };

/** Raised inside the walk to stop at the first limit breach (no point reading further). */
class LimitExceeded extends Error {}

const MAX_REPORTED_ERRORS = 10;

/**
 * Walks an untrusted value and records why it is not a document. Each `read*` returns the value
 * when it has the expected type (or a safe default after recording an error), so one pass both
 * checks and yields a typed copy holding only known fields.
 */
class Reader {
  errors: string[] = [];
  private bytes = 0;
  /**
   * What was read from each object already. An unpacked document (packed.ts) shares one object
   * among the steps holding an unchanged node and among the nodes holding one value: it is read,
   * checked and counted once, and the steps share what it reads to (read-only, as all of it is).
   */
  private readonly done = new Map<object, unknown>();

  constructor(private readonly maxBytes: number) {}

  /** `read(v)`, or what it gave for this very object before. */
  once<T>(v: unknown, read: () => T): T {
    if (typeof v !== "object" || v === null) return read();
    if (this.done.has(v)) return this.done.get(v) as T;
    const out = read();
    this.done.set(v, out);
    return out;
  }

  fail(path: string, message: string): void {
    if (this.errors.length < MAX_REPORTED_ERRORS) this.errors.push(`${path}: ${message}`);
  }

  /** Approximates the serialised size as it walks, so an object document is bounded too. */
  private count(n: number): void {
    this.bytes += n;
    if (this.bytes > this.maxBytes) {
      throw new LimitExceeded(
        `the document is larger than ${Math.round(this.maxBytes / 1024 / 1024)} MB`,
      );
    }
  }

  obj(v: unknown, path: string): Record<string, unknown> {
    this.count(2);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) {
      return v as Record<string, unknown>;
    }
    this.fail(path, `expected an object, got ${describe(v)}`);
    return {};
  }

  arr(v: unknown, path: string, max = Infinity): unknown[] {
    this.count(2);
    if (!Array.isArray(v)) {
      this.fail(path, `expected a list, got ${describe(v)}`);
      return [];
    }
    if (v.length > max) throw new LimitExceeded(`${path} has ${v.length} entries (at most ${max})`);
    return v;
  }

  str(v: unknown, path: string): string {
    if (typeof v === "string") {
      this.count(v.length + 2);
      return v;
    }
    this.fail(path, `expected a string, got ${describe(v)}`);
    return "";
  }

  optStr(v: unknown, path: string): string | null {
    return v === null || v === undefined ? null : this.str(v, path);
  }

  num(v: unknown, path: string): number {
    this.count(8);
    if (typeof v === "number" && Number.isFinite(v)) return v;
    this.fail(path, `expected a finite number, got ${describe(v)}`);
    return 0;
  }

  optNum(v: unknown, path: string): number | null {
    return v === null || v === undefined ? null : this.num(v, path);
  }

  int(v: unknown, path: string): number {
    const n = this.num(v, path);
    if (!Number.isInteger(n)) this.fail(path, `expected an integer, got ${n}`);
    return n;
  }

  bool(v: unknown, path: string): boolean {
    this.count(5);
    if (typeof v === "boolean") return v;
    this.fail(path, `expected true or false, got ${describe(v)}`);
    return false;
  }

  oneOf<T extends string>(v: unknown, path: string, allowed: readonly T[]): T {
    const s = this.str(v, path);
    if ((allowed as readonly string[]).includes(s)) return s as T;
    this.fail(path, `expected one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}`);
    return allowed[0] as T;
  }

  strList(v: unknown, path: string): string[] {
    return this.arr(v, path).map((x, i) => this.str(x, `${path}[${i}]`));
  }

  shape(v: unknown, path: string): Dim[] | null {
    if (v === null || v === undefined) return null;
    return this.arr(v, path).map((x, i) =>
      typeof x === "string" ? this.str(x, `${path}[${i}]`) : this.int(x, `${path}[${i}]`),
    );
  }
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (v === undefined) return "nothing (the field is missing)";
  if (Array.isArray(v)) return "a list";
  return typeof v === "object" ? "an object" : `${typeof v} ${JSON.stringify(v).slice(0, 40)}`;
}

function readValueRef(r: Reader, v: unknown, path: string): ValueRef {
  return r.once(v, () => readValueRefFields(r, v, path));
}

function readValueRefFields(r: Reader, v: unknown, path: string): ValueRef {
  const o = r.obj(v, path);
  return {
    name: r.str(o.name, `${path}.name`),
    shape: r.shape(o.shape, `${path}.shape`),
    dtype: r.optStr(o.dtype, `${path}.dtype`),
    device: r.optStr(o.device, `${path}.device`),
    kind: r.oneOf(o.kind, `${path}.kind`, ["tensor", "number", "other"] as const),
    repr: r.optStr(o.repr, `${path}.repr`),
    path: r.optStr(o.path, `${path}.path`),
  };
}

function readValueRefs(r: Reader, v: unknown, path: string): ValueRef[] {
  return r.arr(v, path).map((x, i) => readValueRef(r, x, `${path}[${i}]`));
}

function readSource(r: Reader, v: unknown, path: string): SourceInfo | null {
  if (v === null || v === undefined) return null;
  const o = r.obj(v, path);
  return {
    file: r.str(o.file, `${path}.file`),
    line: r.int(o.line, `${path}.line`),
    function: r.str(o.function, `${path}.function`),
    module_path: r.optStr(o.module_path, `${path}.module_path`),
    code: r.optStr(o.code, `${path}.code`),
    call_site: readUserFrame(r, o.call_site, `${path}.call_site`),
  };
}

function readNode(r: Reader, v: unknown, path: string): TraceNode {
  return r.once(v, () => readNodeFields(r, v, path));
}

function readNodeFields(r: Reader, v: unknown, path: string): TraceNode {
  const o = r.obj(v, path);
  return {
    id: r.str(o.id, `${path}.id`),
    uid: r.int(o.uid, `${path}.uid`),
    op: r.str(o.op, `${path}.op`),
    label: r.str(o.label, `${path}.label`),
    executor: r.optStr(o.executor, `${path}.executor`),
    fusion: r.bool(o.fusion, `${path}.fusion`),
    inputs: readValueRefs(r, o.inputs, `${path}.inputs`),
    outputs: readValueRefs(r, o.outputs, `${path}.outputs`),
    line: o.line === null ? null : r.int(o.line, `${path}.line`),
    source: readSource(r, o.source, `${path}.source`),
    lineage: r.strList(o.lineage, `${path}.lineage`),
    origin: r.strList(o.origin, `${path}.origin`),
    decomposition:
      o.decomposition === undefined ? [] : r.strList(o.decomposition, `${path}.decomposition`),
    group: r.optStr(o.group, `${path}.group`),
    fused_into: r.optStr(o.fused_into, `${path}.fused_into`),
  };
}

function readEdge(r: Reader, v: unknown, path: string): Edge {
  return r.once(v, () => readEdgeFields(r, v, path));
}

function readEdgeFields(r: Reader, v: unknown, path: string): Edge {
  const o = r.obj(v, path);
  return {
    id: r.str(o.id, `${path}.id`),
    source: r.str(o.source, `${path}.source`),
    target: r.str(o.target, `${path}.target`),
    value: r.str(o.value, `${path}.value`),
    shape: r.shape(o.shape, `${path}.shape`),
    dtype: r.optStr(o.dtype, `${path}.dtype`),
  };
}

function readGroup(r: Reader, v: unknown, path: string): Group {
  return r.once(v, () => readGroupFields(r, v, path));
}

function readGroupFields(r: Reader, v: unknown, path: string): Group {
  const o = r.obj(v, path);
  return {
    id: r.str(o.id, `${path}.id`),
    kind: r.oneOf(o.kind, `${path}.kind`, ["fusion", "module", "decomposition"] as const),
    label: r.str(o.label, `${path}.label`),
    nodes: r.strList(o.nodes, `${path}.nodes`),
    parent: r.optStr(o.parent, `${path}.parent`),
    collapsed: o.collapsed === undefined ? false : r.bool(o.collapsed, `${path}.collapsed`),
    node: r.optStr(o.node, `${path}.node`),
  };
}

function readDiff(r: Reader, v: unknown, path: string): Diff | null {
  if (v === null || v === undefined) return null;
  const o = r.obj(v, path);
  const fusedIn = r.obj(o.fused ?? {}, `${path}.fused`);
  const fused: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  for (const [k, members] of Object.entries(fusedIn)) {
    fused[k] = r.strList(members, `${path}.fused[${JSON.stringify(k)}]`);
  }
  const mergedIn = r.obj(o.merged ?? {}, `${path}.merged`);
  const merged: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, into] of Object.entries(mergedIn))
    merged[k] = r.str(into, `${path}.merged[${JSON.stringify(k)}]`);
  return {
    previous: r.str(o.previous, `${path}.previous`),
    added: r.strList(o.added, `${path}.added`),
    removed: r.strList(o.removed, `${path}.removed`),
    rewritten: r.strList(o.rewritten, `${path}.rewritten`),
    fused,
    merged,
    unchanged: r.int(o.unchanged, `${path}.unchanged`),
  };
}

function readStep(r: Reader, v: unknown, path: string): Step {
  const o = r.obj(v, path);
  const head = {
    id: r.str(o.id, `${path}.id`),
    index: r.int(o.index, `${path}.index`),
    kind: r.oneOf(o.kind, `${path}.kind`, ["prologue", "computation", "backward"] as const),
    pass: r.str(o.pass, `${path}.pass`),
    ms: r.optNum(o.ms, `${path}.ms`),
    ...(o.entry === undefined || o.entry === null
      ? {}
      : { entry: r.int(o.entry, `${path}.entry`) }),
  };
  return withLazyFields(head as Step, STEP_BODY, () => readStepBody(r, o, path));
}

/** A step's body, or an empty one whose `problems` say why it is not readable. */
function readStepBody(
  r: Reader,
  o: Record<string, unknown>,
  path: string,
): Record<string, unknown> {
  const outer = r.errors;
  r.errors = [];
  try {
    const body = {
      source: r.str(o.source, `${path}.source`),
      nodes: r
        .arr(o.nodes, `${path}.nodes`, LIMITS.maxNodesPerStep)
        .map((x, i) => readNode(r, x, `${path}.nodes[${i}]`)),
      edges: r.arr(o.edges, `${path}.edges`).map((x, i) => readEdge(r, x, `${path}.edges[${i}]`)),
      inner_edges:
        o.inner_edges === undefined
          ? []
          : r
              .arr(o.inner_edges, `${path}.inner_edges`)
              .map((x, i) => readEdge(r, x, `${path}.inner_edges[${i}]`)),
      groups: r
        .arr(o.groups, `${path}.groups`)
        .map((x, i) => readGroup(r, x, `${path}.groups[${i}]`)),
      inputs: readValueRefs(r, o.inputs, `${path}.inputs`),
      outputs: r.strList(o.outputs, `${path}.outputs`),
      diff: readDiff(r, o.diff, `${path}.diff`),
    };
    // nothing of a body that failed is shown: its defaults would look like data
    return r.errors.length ? { ...emptyBody(), problems: r.errors } : { ...body, problems: [] };
  } catch (e) {
    // over a limit, or a packed body that does not unpack (packed.ts)
    if (!(e instanceof Error)) throw e;
    const problem = e instanceof LimitExceeded ? e.message : `${path}: ${e.message}`;
    return { ...emptyBody(), problems: [...r.errors, problem] };
  } finally {
    r.errors = outer;
  }
}

function emptyBody(): Record<string, unknown> {
  return {
    source: "",
    nodes: [],
    edges: [],
    inner_edges: [],
    groups: [],
    inputs: [],
    outputs: [],
    diff: null,
  };
}

function readUserFrame(r: Reader, v: unknown, path: string): UserFrame | null {
  if (v === null || v === undefined) return null;
  const o = r.obj(v, path);
  return {
    file: r.str(o.file, `${path}.file`),
    line: r.int(o.line, `${path}.line`),
    function: r.str(o.function, `${path}.function`),
    code: r.optStr(o.code, `${path}.code`),
  };
}

function readError(r: Reader, v: unknown, path: string): ErrorInfo | null {
  if (v === null || v === undefined) return null;
  const o = r.obj(v, path);
  return {
    type: r.str(o.type, `${path}.type`),
    message: r.str(o.message, `${path}.message`),
    stage: r.oneOf(o.stage, `${path}.stage`, ["tracing", "compiling", "running"] as const),
    user_frame: readUserFrame(r, o.user_frame, `${path}.user_frame`),
  };
}

function readRun(r: Reader, v: unknown, path: string): Run {
  const o = r.obj(v, path);
  return {
    id: r.str(o.id, `${path}.id`),
    executors: r.strList(o.executors, `${path}.executors`),
    first_call: o.first_call === undefined ? false : r.bool(o.first_call, `${path}.first_call`),
    median_ms: r.optNum(o.median_ms, `${path}.median_ms`),
    repeats: o.repeats === undefined ? 0 : r.int(o.repeats, `${path}.repeats`),
    compile_ms: o.compile_ms === undefined ? null : r.optNum(o.compile_ms, `${path}.compile_ms`),
    max_abs_diff: r.optNum(o.max_abs_diff, `${path}.max_abs_diff`),
    matches_eager:
      o.matches_eager === null || o.matches_eager === undefined
        ? null
        : r.bool(o.matches_eager, `${path}.matches_eager`),
    differs_at:
      o.differs_at === null || o.differs_at === undefined
        ? null
        : r.str(o.differs_at, `${path}.differs_at`),
    tolerance:
      o.tolerance === null || o.tolerance === undefined
        ? null
        : r.str(o.tolerance, `${path}.tolerance`),
    not_comparable:
      o.not_comparable === null || o.not_comparable === undefined
        ? null
        : r.str(o.not_comparable, `${path}.not_comparable`),
    cache_hits: r.int(o.cache_hits, `${path}.cache_hits`),
    cache_misses: r.int(o.cache_misses, `${path}.cache_misses`),
    fusions: o.fusions === undefined ? [] : readFusions(r, o.fusions, `${path}.fusions`),
    error: readError(r, o.error, `${path}.error`),
  };
}

function readFusions(r: Reader, v: unknown, path: string): FusionStatus[] {
  return r.arr(v, path).map((x, i) => {
    const o = r.obj(x, `${path}[${i}]`);
    return {
      name: r.str(o.name, `${path}[${i}].name`),
      status: r.str(o.status, `${path}[${i}].status`),
    };
  });
}

function readEntries(r: Reader, v: unknown, path: string): CacheEntries | null {
  if (v === null || v === undefined) return null;
  const o = r.obj(v, path);
  const shown = o.shown === null || o.shown === undefined ? null : r.int(o.shown, `${path}.shown`);
  if (o.items === undefined && o.inputs !== undefined) {
    // written before the picker: the inputs of each entry, and the steps only of the shown one
    const inputs = r
      .arr(o.inputs, `${path}.inputs`)
      .map((x, i) => r.str(x, `${path}.inputs[${i}]`));
    const items = inputs.map((text, i) => ({
      label: `entry ${i + 1}: ${text}`,
      inputs: text,
      symbolic: text.includes("(symbolic"),
      hits: null,
      compile_ms: null,
      steps: false,
    }));
    return { items, shown };
  }
  const items = r.arr(o.items, `${path}.items`).map((x, i) => {
    const where = `${path}.items[${i}]`;
    const item = r.obj(x, where);
    return {
      label: r.str(item.label, `${where}.label`),
      inputs: r.str(item.inputs, `${where}.inputs`),
      symbolic: r.bool(item.symbolic, `${where}.symbolic`),
      hits:
        item.hits === null || item.hits === undefined ? null : r.int(item.hits, `${where}.hits`),
      compile_ms: r.optNum(item.compile_ms, `${where}.compile_ms`),
      steps: r.bool(item.steps, `${where}.steps`),
    };
  });
  return { items, shown };
}

/** A list of strings that older documents leave out (then empty). */
function optStrList(r: Reader, v: unknown, path: string): string[] {
  if (v === null || v === undefined) return [];
  return r.arr(v, path).map((x, i) => r.str(x, `${path}[${i}]`));
}

function readReasons(r: Reader, v: unknown, path: string): Record<string, string> {
  const o = r.obj(v, path);
  const out: Record<string, string> = {};
  for (const [name, reason] of Object.entries(o)) out[name] = r.str(reason, `${path}.${name}`);
  return out;
}

function readExecutors(r: Reader, v: unknown, path: string): ExecutorsInfo | null {
  if (v === null || v === undefined) return null;
  const o = r.obj(v, path);
  return {
    available: r.strList(o.available, `${path}.available`),
    selected: r.strList(o.selected, `${path}.selected`),
    always: o.always === undefined ? [] : r.strList(o.always, `${path}.always`),
    unavailable:
      o.unavailable === undefined ? {} : readReasons(r, o.unavailable, `${path}.unavailable`),
    interactive: r.bool(o.interactive, `${path}.interactive`),
    reason: r.optStr(o.reason, `${path}.reason`),
  };
}

function readProfile(r: Reader, v: unknown, path: string): Profile | null {
  if (v === null || v === undefined) return null;
  const o = r.obj(v, path);
  const stepsIn = r.obj(o.steps, `${path}.steps`);
  const steps: Record<string, StepCosts> = Object.create(null) as Record<string, StepCosts>;
  for (const [sid, cost] of Object.entries(stepsIn)) {
    const where = `${path}.steps[${JSON.stringify(sid)}]`;
    const c = r.obj(cost, where);
    const nodesIn = r.obj(c.nodes, `${where}.nodes`);
    const nodes: Record<string, NodeCost> = Object.create(null) as Record<string, NodeCost>;
    for (const [nid, nc] of Object.entries(nodesIn)) {
      const n = r.obj(nc, `${where}.nodes[${JSON.stringify(nid)}]`);
      nodes[nid] = { ms: r.num(n.ms, `${where}.ms`), bytes: r.num(n.bytes, `${where}.bytes`) };
    }
    steps[sid] = { total_ms: r.num(c.total_ms, `${where}.total_ms`), nodes };
  }
  const modules = r.arr(o.modules, `${path}.modules`).map((x, i) => {
    const m = r.obj(x, `${path}.modules[${i}]`);
    return {
      path: r.str(m.path, `${path}.modules[${i}].path`),
      ms: r.num(m.ms, `${path}.modules[${i}].ms`),
      backward_ms: r.num(m.backward_ms, `${path}.modules[${i}].backward_ms`),
      eager_ms: r.optNum(m.eager_ms, `${path}.modules[${i}].eager_ms`),
      eager_backward_ms: r.optNum(m.eager_backward_ms, `${path}.modules[${i}].eager_backward_ms`),
      shared: optStrList(r, m.shared, `${path}.modules[${i}].shared`),
      backward_shared: optStrList(r, m.backward_shared, `${path}.modules[${i}].backward_shared`),
    };
  });
  let saved: SavedTimeline | null = null;
  if (o.saved !== null && o.saved !== undefined) {
    const sv = r.obj(o.saved, `${path}.saved`);
    saved = {
      step: r.str(sv.step, `${path}.saved.step`),
      bytes: r.optNum(sv.bytes, `${path}.saved.bytes`),
      bytes_before_remat: r.optNum(sv.bytes_before_remat, `${path}.saved.bytes_before_remat`),
      timeline: r.arr(sv.timeline, `${path}.saved.timeline`).map((x, i) => {
        const pair = r.arr(x, `${path}.saved.timeline[${i}]`);
        return [
          r.str(pair[0], `${path}.saved.timeline[${i}][0]`),
          r.num(pair[1], `${path}.saved.timeline[${i}][1]`),
        ] as [string, number];
      }),
    };
  }
  return {
    calls: r.int(o.calls, `${path}.calls`),
    device: r.str(o.device, `${path}.device`),
    call_ms: r.num(o.call_ms, `${path}.call_ms`),
    eager_call_ms: r.optNum(o.eager_call_ms, `${path}.eager_call_ms`),
    backward: r.bool(o.backward, `${path}.backward`),
    attributed_ms: r.num(o.attributed_ms, `${path}.attributed_ms`),
    measured: r.optStr(o.measured, `${path}.measured`),
    unsteady: o.unsteady === undefined ? false : r.bool(o.unsteady, `${path}.unsteady`),
    uncompiled:
      o.uncompiled === undefined || o.uncompiled === null
        ? {}
        : readReasons(r, o.uncompiled, `${path}.uncompiled`),
    steps,
    modules,
    saved,
  };
}

/**
 * Checks that `input` (a parsed object or JSON text) is a version-1 trace document and returns a
 * typed copy holding only the documented fields, or readable reasons why it is not one. Each
 * step's body is checked on its first use (Note [Lazy steps]): its `problems` say what failed.
 */
export function readDocument(input: unknown, maxBytes: number = LIMITS.maxBytes): ValidationResult {
  let value = input;
  if (typeof input === "string") {
    if (input.length > maxBytes) {
      return {
        ok: false,
        errors: [`the document is larger than ${Math.round(maxBytes / 1024 / 1024)} MB`],
      };
    }
    try {
      value = JSON.parse(input) as unknown;
    } catch (e) {
      return { ok: false, errors: [`the document is not valid JSON (${String(e)})`] };
    }
  }
  const r = new Reader(maxBytes);
  try {
    const o = r.obj(value, "document");
    if (r.errors.length) return { ok: false, errors: r.errors };
    if (o.schema !== SCHEMA_NAME) {
      return {
        ok: false,
        errors: [`schema: expected "${SCHEMA_NAME}", got ${describe(o.schema)}`],
      };
    }
    if (o.version !== SCHEMA_VERSION) {
      return {
        ok: false,
        errors: [
          `version: this explorer reads version ${SCHEMA_VERSION} documents, got ${describe(o.version)}` +
            " (update thunder_viz to read newer documents)",
        ],
      };
    }
    const doc: TraceDocument = {
      schema: SCHEMA_NAME,
      version: SCHEMA_VERSION,
      title: r.str(o.title, "title"),
      steps: r.arr(o.steps, "steps", LIMITS.maxSteps).map((x, i) => readStep(r, x, `steps[${i}]`)),
      runs:
        o.runs === undefined
          ? []
          : r.arr(o.runs, "runs").map((x, i) => readRun(r, x, `runs[${i}]`)),
      executors: readExecutors(r, o.executors, "executors"),
      error: readError(r, o.error, "error"),
      profile: readProfile(r, o.profile, "profile"),
      autograd: r.optStr(o.autograd, "autograd"),
      entries: readEntries(r, o.entries, "entries"),
    };
    if (r.errors.length) return { ok: false, errors: r.errors };
    return { ok: true, doc };
  } catch (e) {
    if (e instanceof LimitExceeded) return { ok: false, errors: [e.message] };
    throw e;
  }
}

/** `readDocument` with every step's body checked now: the whole document passes, or why not. */
export function validateDocument(
  input: unknown,
  maxBytes: number = LIMITS.maxBytes,
): ValidationResult {
  const result = readDocument(input, maxBytes);
  if (!result.ok) return result;
  const errors = new Set<string>();
  for (const step of result.doc.steps) for (const p of step.problems ?? []) errors.add(p);
  if (!errors.size) return result;
  return { ok: false, errors: [...errors].slice(0, MAX_REPORTED_ERRORS) };
}
