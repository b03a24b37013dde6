import { readFileSync } from "node:fs";
import { gunzipSync, gzipSync } from "node:zlib";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test, vi } from "vitest";
import { staticHost } from "../src/host";
import { isPacked, packedFromHtml, unpackDocument, unpackPayload } from "../src/packed";
import { readDocument, validateDocument } from "../src/schema";
import { fixture, mountDoc } from "./helpers";

const here = dirname(fileURLToPath(import.meta.url));
// Written by thunder_viz/render/pack.py from real-mlp.json (tests/viz/test_render.py checks that
// Python unpacks it to the same document, so both sides read one format).
const packed = JSON.parse(readFileSync(join(here, "fixtures", "real-mlp.packed.json"), "utf8"));

function wrap(payload: unknown): {
  schema: string;
  version: number;
  encoding: "gzip-base64";
  data: string;
} {
  const data = gzipSync(Buffer.from(JSON.stringify(payload))).toString("base64");
  return { schema: "thunder-trace", version: 1, encoding: "gzip-base64", data };
}

describe("packed documents", () => {
  test("unpack to the document Python packed", async () => {
    expect(isPacked(packed)).toBe(true);
    const doc = await unpackDocument(packed);
    expect(doc).toEqual(fixture("real-mlp"));
  });

  test("a packed text of one line (older notebooks: the steps whole) reads the same", async () => {
    const lines = gunzipSync(Buffer.from(packed.data, "base64")).toString("utf8").split("\n");
    expect(lines.length).toBe(fixture("real-mlp").steps.length + 1); // a line per step body
    const payload = JSON.parse(lines[0]!) as { steps: Record<string, unknown>[] };
    payload.steps = payload.steps.map((head, i) => ({ ...head, ...JSON.parse(lines[i + 1]!) }));
    expect(await unpackDocument(wrap(payload))).toEqual(fixture("real-mlp"));
    const short = gzipSync(Buffer.from(lines.slice(0, 3).join("\n"))).toString("base64");
    await expect(unpackDocument({ ...packed, data: short })).rejects.toThrow(/2 step bodies for/);
  });

  test("an item the previous step does not hold is an error, not a guess", () => {
    const payload = {
      values: [],
      lines: ["x"],
      steps: [{ kind: "computation", nodes: [{ "=": 1, id: "n9" }], source: [0], inputs: [] }],
    };
    // a step is unpacked when it is first read (Note [Lazy steps])
    const step = (unpackPayload(payload).steps as { nodes: unknown }[])[0]!;
    expect(() => step.nodes).toThrow(/previous step does not hold/);
    const badRef = { values: [], lines: [], steps: [{ kind: "computation", source: [3] }] };
    expect(() => (unpackPayload(badRef).steps as { source: unknown }[])[0]!.source).toThrow(
      /does not exist/,
    );
  });

  test("an item the previous step holds twice (x * x reads x twice) is its last, as pack.py's map", () => {
    const edge = (id: string, target: unknown) => ({ id, source: "input:x", target, value: "x" });
    const payload = {
      values: [],
      lines: ["x"],
      steps: [
        { kind: "computation", edges: [edge("e1", "n1"), edge("e2", "n1"), edge("e3", "n2")] },
        {
          kind: "computation",
          edges: [
            { "=": 1, source: "input:x", target: "n1", value: "x", dtype: "f32" },
            { "=": 1, source: "input:x", target: "n2", value: "x" },
          ],
        },
      ],
    };
    const steps = unpackPayload(payload).steps as { edges: unknown }[];
    expect(steps[1]!.edges).toEqual([{ ...edge("e2", "n1"), dtype: "f32" }, edge("e3", "n2")]);
  });

  test("a run stands for consecutive items of the previous step, the same objects", () => {
    const node = (id: string) => ({ id, op: "add", inputs: [], outputs: [] });
    const payload = {
      values: [],
      lines: ["x"],
      steps: [
        { kind: "computation", nodes: [node("a"), node("b"), node("c"), node("d")], source: [0] },
        {
          kind: "computation",
          nodes: [[0, 2], { "=": 1, id: "c", op: "mul" }, [3, 1]],
          source: [0],
        },
        { kind: "computation", nodes: [[1, 9]], source: [0] },
      ],
    };
    const steps = unpackPayload(payload).steps as { nodes: { id: string; op: string }[] }[];
    expect(steps[1]!.nodes.map((n) => `${n.id}:${n.op}`)).toEqual([
      "a:add",
      "b:add",
      "c:mul",
      "d:add",
    ]);
    expect(steps[1]!.nodes[0]).toBe(steps[0]!.nodes[0]);
    expect(() => steps[2]!.nodes).toThrow(/run refers to items the previous step does not hold/);
  });

  test("a step that does not unpack is shown as a problem of that step, the others are read", () => {
    const head = { id: "s", index: 0, kind: "computation", pass: "p", ms: null, outputs: [] };
    const good = { ...head, id: "s0", nodes: [], edges: [], groups: [], source: [0], inputs: [] };
    const payload = {
      schema: "thunder-trace",
      version: 1,
      title: "t",
      values: [],
      lines: ["x"],
      steps: [good, { ...good, id: "s1", index: 1, kind: "backward", source: [7] }],
    };
    const read = readDocument(unpackPayload(payload));
    expect(read.ok).toBe(true);
    if (read.ok) {
      expect(read.doc.steps[0]!.problems).toEqual([]);
      expect(read.doc.steps[0]!.source).toBe("x");
      expect(read.doc.steps[1]!.nodes).toEqual([]);
      expect(read.doc.steps[1]!.problems).toEqual([
        "steps[1]: steps[1].source refers to an entry that does not exist",
      ]);
    }
    const checked = validateDocument(unpackPayload(payload));
    expect(checked.ok).toBe(false);
  });

  test("lines that span the decompressor's chunks, multibyte characters split between them, read whole", async () => {
    // Note [Decoding on first use]: the lines are decoded from the chunks, not from one string
    const text = "é€😀 = ltorch.add(a, b)  # ünïcode".repeat(20_000); // ~0.8 MB, 1-4 byte characters
    const head = { values: [], lines: [text, "x"], steps: [{ kind: "computation" }] };
    const body = { nodes: [], edges: [], source: [1, 0, 1] };
    const data = gzipSync(Buffer.from(`${JSON.stringify(head)}\n${JSON.stringify(body)}`));
    const doc = await unpackDocument({ ...wrap({}), data: data.toString("base64") });
    expect((doc.steps as { source: string }[])[0]!.source).toBe(`x\n${text}\nx`);
  });

  test("refuse to inflate past the size limit", async () => {
    const bomb = wrap({ values: [], lines: ["a".repeat(4096)], steps: [] });
    await expect(unpackDocument(bomb, 1024)).rejects.toThrow(/larger than/);
  });

  test("are found in the HTML snapshot that embeds them", () => {
    const html = `<div><script type="application/json" id="t-doc" data-thunder-doc>${JSON.stringify(packed)}</script></div>`;
    expect(packedFromHtml(html)).toEqual(packed);
    expect(packedFromHtml("<p>nothing here</p>")).toBeNull();
  });

  test("show in the explorer once unpacked", async () => {
    const host = staticHost(packed, "saved output");
    const m = mountDoc(undefined, host);
    expect(m.q('[data-testid="status"]').textContent).toContain("unpacking");
    await vi.waitFor(() =>
      expect(m.q('[data-testid="status"]').textContent).toContain("saved output"),
    );
    expect(m.root.getAttribute("data-ready")).toBe("true");
    expect(m.all(".tx-step").length).toBe(fixture("real-mlp").steps.length);
    expect(validateDocument(host.getDocument()).ok).toBe(true);
    m.cleanup();
  });

  test("that cannot be read show why", async () => {
    const host = staticHost({ ...packed, data: "bm90IGd6aXA=" });
    const m = mountDoc(undefined, host);
    await vi.waitFor(() => expect(m.root.getAttribute("data-invalid")).toBe("true"));
    expect(m.root.textContent).toMatch(/unreadable packed document/);
    m.cleanup();
  });

  test("share what consecutive steps share, and read to what the plain document reads to", async () => {
    const doc = await unpackDocument(packed);
    const steps = doc.steps as { nodes: object[] }[];
    const shared = steps
      .slice(1)
      .some((st, i) => st.nodes.some((n) => steps[i]!.nodes.includes(n)));
    expect(shared).toBe(true); // an unchanged node is one object, not a copy
    const fromPacked = validateDocument(doc);
    const fromPlain = validateDocument(fixture("real-mlp"));
    expect(fromPacked.ok && fromPlain.ok).toBe(true);
    if (fromPacked.ok && fromPlain.ok) expect(fromPacked.doc).toEqual(fromPlain.doc);
  });
});

test("executors beside the packed data replace the document's (the live widget's)", async () => {
  const packed = JSON.parse(
    readFileSync(join(here, "fixtures", "real-mlp.packed.json"), "utf8"),
  ) as Record<string, unknown>;
  const live = {
    available: ["torch"],
    selected: ["torch"],
    always: ["torch"],
    unavailable: {},
    interactive: true,
    reason: null,
  };
  const doc = (await unpackDocument({ ...packed, executors: live } as never)) as {
    executors: unknown;
    steps: unknown[];
  };
  expect(doc.executors).toEqual(live);
  expect(doc.steps.length).toBeGreaterThan(0);
});
