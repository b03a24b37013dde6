/**
 * Reads the packed form of a trace document (thunder_viz/render/pack.py), which saved notebooks
 * and HTML snapshots store: gzip + base64 of the document with its value refs, source lines and
 * repeated items shared. Unpacking gives back the plain document, which the core validates as
 * usual (schema.ts): this file trusts nothing and only rebuilds JSON.
 *
 * Layer: front-end core; imports the schema's limits and lazy.ts.
 */
import { withLazyFields } from "./lazy";
import { LIMITS } from "./schema";

export const PACKED_ENCODING = "gzip-base64";
const SAME = "=";
const DROPPED = "-";
/** The fields that identify an item of each list across the steps of one kind. */
const KEYS: Record<string, string[]> = {
  nodes: ["id"],
  groups: ["id"],
  edges: ["source", "target", "value"],
  inner_edges: ["source", "target", "value"],
};

type Json = Record<string, unknown>;

export interface PackedDocument {
  schema: string;
  version: number;
  encoding: typeof PACKED_ENCODING;
  /** base64 of the gzip of the packed JSON; absent when `data_in` names where it is. */
  data?: string;
  /** The notebook output's mime type whose HTML snapshot holds the packed document. */
  data_in?: string;
  /** Replaces the document's executors (the live widget: its saved form's data, live executors). */
  executors?: unknown;
}

export function isPacked(doc: unknown): doc is PackedDocument {
  return (
    typeof doc === "object" &&
    doc !== null &&
    (doc as { encoding?: unknown }).encoding === PACKED_ENCODING
  );
}

function isObj(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function arr(v: unknown, what: string): unknown[] {
  if (!Array.isArray(v)) throw new Error(`${what} is not a list`);
  return v;
}

function part(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v ?? null);
}

/** An item's identity across steps: its key fields (an id, or source, target and value). */
function keyOf(item: Json, keys: string[]): string {
  if (keys.length === 1) return part(item[keys[0] as string]);
  let key = "";
  for (const k of keys) key += `${part(item[k])}\u0000`;
  return key;
}

/** `base` with `item`'s fields over it, less the markers and the fields `item` drops. */
function merge(base: Json, item: Json): Json {
  const dropped = item[DROPPED];
  const skip = Array.isArray(dropped) ? new Set<unknown>(dropped) : null;
  const merged: Json = {};
  // no `delete`: it would leave every node in V8's slow dictionary mode
  for (const k in base) if (!(k in item) && !skip?.has(k)) merged[k] = base[k];
  for (const k in item) if (k !== SAME && k !== DROPPED && !skip?.has(k)) merged[k] = item[k];
  return merged;
}

/** Whether a packed item says only "as in the previous step" (its key fields and the marker). */
function unchanged(item: Json, keys: string[]): boolean {
  let n = 0;
  for (const k in item) {
    if (k !== SAME && !keys.includes(k)) return false;
    n++;
  }
  return n === keys.length + 1;
}

/** A run of a packed list: `[first, count]`, the previous step's items first..first+count-1. */
function runOf(item: unknown[], previous: unknown[]): unknown[] {
  const [first, count] = item;
  if (
    item.length !== 2 ||
    !Number.isInteger(first) ||
    !Number.isInteger(count) ||
    (first as number) < 0 ||
    (count as number) < 1 ||
    (first as number) + (count as number) > previous.length
  ) {
    throw new Error("a packed run refers to items the previous step does not hold");
  }
  return previous.slice(first as number, (first as number) + (count as number));
}

function undelta(previous: unknown[] | undefined, current: unknown[], keys: string[]): Json[] {
  let before: Map<string, Json> | null = null; // built when an item first needs it
  const out: Json[] = [];
  for (const item of current) {
    if (Array.isArray(item)) {
      // most items of a step are the previous step's: the same objects, not copies of them
      for (const same of runOf(item, previous ?? [])) out.push(same as Json);
      continue;
    }
    if (!isObj(item)) throw new Error("a packed item is not an object");
    if (!(SAME in item)) {
      out.push(item);
      continue;
    }
    if (!before) {
      before = new Map<string, Json>();
      for (const p of previous ?? []) if (isObj(p)) before.set(keyOf(p, keys), p);
    }
    const base = before.get(keyOf(item, keys));
    if (!base) throw new Error("a packed item refers to an item the previous step does not hold");
    out.push(unchanged(item, keys) ? base : merge(base, item));
  }
  return out;
}

function lookup(table: unknown[], refs: unknown, what: string): unknown[] {
  return arr(refs, what).map((i) => {
    if (typeof i !== "number" || !Number.isInteger(i) || i < 0 || i >= table.length) {
      throw new Error(`${what} refers to an entry that does not exist`);
    }
    return table[i];
  });
}

/**
 * A packed step's body: its delta-coded lists (KEYS) and those made of table indices. The packed
 * text holds each step's body on a line of its own (pack.py), parsed when the step is first read.
 */
const BODY = [...Object.keys(KEYS), "inputs", "source"];

/** The JSON texts of the steps' bodies (see BODY), by step, each decoded on first use. */
export interface StepBodies {
  readonly count: number;
  text(step: number): string;
}

/**
 * The plain document of a packed payload (the JSON inside `data`). Each step's lists are
 * unpacked on first use (Note [Lazy steps] in schema.ts): a step's delta needs the previous step
 * of its kind, so the first read of a step unpacks the earlier steps of its kind that are not yet.
 * `bodies` are the steps' bodies, when the packed text held them apart (see BODY). A step that
 * does not unpack throws on that read.
 */
export function unpackPayload(payload: unknown, bodies?: StepBodies): Json {
  if (!isObj(payload)) throw new Error("the packed document is not an object");
  const values = arr(payload.values, "values");
  const lines = arr(payload.lines, "lines");
  const heads = arr(payload.steps, "steps").map((raw, s) => {
    if (!isObj(raw)) throw new Error(`steps[${s}] is not an object`);
    return raw;
  });
  if (bodies && bodies.count !== heads.length) {
    throw new Error(
      `the packed document has ${bodies.count} step bodies for ${heads.length} steps`,
    );
  }
  const parsed = new Map<number, Json>();
  /** Step `s` whole: its head and, parsed on first use, its body. */
  const rawStep = (s: number): Json => {
    const head = heads[s]!;
    if (!bodies) return head;
    let step = parsed.get(s);
    if (!step) {
      const body = JSON.parse(bodies.text(s)) as unknown;
      if (!isObj(body)) throw new Error(`the body of steps[${s}] is not an object`);
      step = { ...head, ...body };
      parsed.set(s, step);
    }
    return step;
  };
  // each step's delta-coded lists, undone (value refs still indices), by step
  const undone = new Map<number, Json>();
  const listsOf = (s: number): Json => {
    const known = undone.get(s);
    if (known) return known;
    const raw = rawStep(s);
    let p = s - 1;
    while (p >= 0 && heads[p]!.kind !== raw.kind) p--;
    const before = p >= 0 ? listsOf(p) : undefined;
    const lists: Json = {};
    for (const [name, keys] of Object.entries(KEYS)) {
      lists[name] = undelta(
        before?.[name] as unknown[] | undefined,
        arr(raw[name] ?? [], `steps[${s}].${name}`),
        keys,
      );
    }
    undone.set(s, lists);
    return lists;
  };
  // a node shared by consecutive steps (see undelta) is resolved once
  const resolved = new Map<Json, Json>();
  const steps = heads.map((given, s) => {
    const head: Json = {};
    for (const k in given) if (!BODY.includes(k)) head[k] = given[k];
    return withLazyFields(head, BODY, () => {
      const raw = rawStep(s);
      const lists = { ...listsOf(s) };
      lists.nodes = (lists.nodes as Json[]).map((n) => {
        let node = resolved.get(n);
        if (!node) {
          node = {
            ...n,
            inputs: lookup(values, n.inputs, `steps[${s}] node inputs`),
            outputs: lookup(values, n.outputs, `steps[${s}] node outputs`),
          };
          resolved.set(n, node);
        }
        return node;
      });
      lists.inputs = lookup(values, raw.inputs ?? [], `steps[${s}].inputs`);
      lists.source = lookup(lines, raw.source ?? [], `steps[${s}].source`).join("\n");
      return lists;
    });
  });
  const doc: Json = { ...payload, steps };
  delete doc.values;
  delete doc.lines;
  return doc;
}

function base64Bytes(text: string): Uint8Array {
  // native where the browser has it (Chromium 140, Firefox 133, Safari 18.2): no binary string
  const typed = Uint8Array as unknown as { fromBase64?: (s: string) => Uint8Array };
  if (typeof typed.fromBase64 === "function") return typed.fromBase64(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/**
 * Gunzips `bytes` into the decompressor's chunks, in order, refusing output beyond the documents'
 * size limit (a packed bomb). The chunks are not joined (Note [Decoding on first use]).
 */
async function gunzip(bytes: Uint8Array, maxBytes: number): Promise<Uint8Array[]> {
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
  const reader = source.pipeThrough(new DecompressionStream("gzip")).getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > maxBytes) {
      await reader.cancel();
      throw new Error(`the document is larger than ${Math.round(maxBytes / 1024 / 1024)} MB`);
    }
    chunks.push(value);
  }
  return chunks;
}

/**
 * The lines of the UTF-8 text in `chunks`, each decoded on first use.
 *
 * Note [Decoding on first use]: a 12-layer GPT-2's packed text is 3.7 MB, and its first render
 * reads two lines of it, the payload's and the shown step's (a third of it). Decoding all of it
 * into one string and splitting that, or only joining the decompressor's chunks into one array,
 * cost the first render more than a line's decoding does: the lines are found in the chunks
 * and decoded from them (a line may span chunks: the decoder streams across them). A newline
 * byte is always a line break: JSON text escapes newlines in strings, and no byte of a multibyte
 * UTF-8 character is 0x0A.
 */
function utf8Lines(chunks: Uint8Array[]): { count: number; text(i: number): string } {
  // where each line ends: the chunk and offset of its newline; the text's end for the last line
  const ends: [number, number][] = [];
  chunks.forEach((c, k) => {
    for (let at = c.indexOf(10); at >= 0; at = c.indexOf(10, at + 1)) ends.push([k, at]);
  });
  ends.push([chunks.length - 1, chunks[chunks.length - 1]?.length ?? 0]);
  return {
    count: ends.length,
    text(i: number): string {
      const before = ends[i - 1];
      let [k, at] = before ? [before[0], before[1] + 1] : [0, 0];
      const [last, end] = ends[i]!;
      const decoder = new TextDecoder();
      const parts: string[] = [];
      for (; k < last; k++, at = 0) {
        parts.push(decoder.decode(chunks[k]!.subarray(at), { stream: true }));
      }
      parts.push(decoder.decode(chunks[last]?.subarray(at, end)));
      return parts.join("");
    },
  };
}

/** The plain document of a packed wrapper that holds its `data`. */
export async function unpackDocument(
  doc: PackedDocument,
  maxBytes: number = LIMITS.maxBytes,
): Promise<Json> {
  if (typeof doc.data !== "string") throw new Error("the packed document holds no data");
  const lines = utf8Lines(await gunzip(base64Bytes(doc.data), maxBytes));
  // the payload, then one line per step body (pack.py); one line: the steps whole (older notebooks)
  const bodies: StepBodies = { count: lines.count - 1, text: (s) => lines.text(s + 1) };
  const plain = unpackPayload(
    JSON.parse(lines.text(0)) as unknown,
    bodies.count ? bodies : undefined,
  );
  // the live widget sends its saved form's data with its live executors beside it
  if (isObj(doc.executors)) plain.executors = doc.executors;
  return plain;
}

/**
 * The packed wrapper inside an HTML snapshot (thunder_viz/render/html.py embeds it in a
 * `<script type="application/json" data-thunder-doc>`), for an output whose document is stored
 * only in its `text/html`. Parsed with DOMParser, which runs no script.
 */
export function packedFromHtml(html: string): PackedDocument | null {
  const page = new DOMParser().parseFromString(html, "text/html");
  const script = page.querySelector("script[data-thunder-doc]");
  if (!script?.textContent) return null;
  const value = JSON.parse(script.textContent) as unknown;
  return isPacked(value) ? value : null;
}
