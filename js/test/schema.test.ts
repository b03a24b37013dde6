import { describe, expect, test } from "vitest";
import { LIMITS, validateDocument } from "../src/schema";
import { fixture } from "./helpers";

describe("validateDocument", () => {
  test("accepts the sample documents", () => {
    for (const name of ["sample", "sample-error"] as const) {
      const result = validateDocument(fixture(name));
      expect(result.ok, JSON.stringify(result)).toBe(true);
    }
  });

  test("accepts JSON text and returns only documented fields", () => {
    const doc = fixture("sample") as unknown as Record<string, unknown>;
    doc.extra = "<b>ignored</b>";
    const result = validateDocument(JSON.stringify(doc));
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.doc.steps).toHaveLength(4);
      expect("extra" in result.doc).toBe(false);
    }
  });

  test("rejects another schema", () => {
    const result = validateDocument({ ...fixture("sample"), schema: "something-else" });
    expect(result).toEqual({
      ok: false,
      errors: ['schema: expected "thunder-trace", got string "something-else"'],
    });
  });

  test("rejects an unknown version and says how to fix it", () => {
    const result = validateDocument({ ...fixture("sample"), version: 2 });
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.errors[0]).toMatch(
        /reads version 1 documents, got number 2.*update thunder_viz/,
      );
  });

  test("names the path of a missing field", () => {
    const doc = fixture("sample") as unknown as { steps: { nodes: Record<string, unknown>[] }[] };
    delete doc.steps[1]!.nodes[2]!.op;
    const result = validateDocument(doc);
    expect(result).toEqual({
      ok: false,
      errors: ["steps[1].nodes[2].op: expected a string, got nothing (the field is missing)"],
    });
  });

  test("names the path of a wrong type", () => {
    const doc = fixture("sample") as unknown as { steps: { edges: Record<string, unknown>[] }[] };
    doc.steps[3]!.edges[0]!.shape = [true, 8];
    const result = validateDocument(doc);
    expect(result.ok).toBe(false);
    if (!result.ok)
      expect(result.errors).toContain(
        "steps[3].edges[0].shape[0]: expected a finite number, got boolean true",
      );
  });

  test("accepts symbolic dimensions and documents without the added fields", () => {
    const doc = fixture("sample") as unknown as { steps: Record<string, unknown>[] };
    const step = doc.steps[1] as { inner_edges?: unknown; edges: { shape: unknown }[] };
    step.edges[0]!.shape = ["s0", 8];
    delete step.inner_edges;
    const result = validateDocument(doc);
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(result.doc.steps[1]!.edges[0]!.shape).toEqual(["s0", 8]);
      expect(result.doc.steps[1]!.inner_edges).toEqual([]);
    }
  });

  test("rejects non-objects and bad JSON", () => {
    expect(validateDocument(null).ok).toBe(false);
    expect(validateDocument([1, 2]).ok).toBe(false);
    const bad = validateDocument("{not json");
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.errors[0]).toMatch(/not valid JSON/);
  });

  test("rejects oversize documents, as text and as objects", () => {
    const text = JSON.stringify(fixture("sample"));
    const asText = validateDocument(text, 1000);
    expect(asText).toEqual({ ok: false, errors: ["the document is larger than 0 MB"] });
    const asObject = validateDocument(fixture("sample"), 2 * 1024 * 1024);
    expect(asObject.ok).toBe(true);
    const tooBig = validateDocument(fixture("sample"), 5000);
    expect(tooBig.ok).toBe(false);
    if (!tooBig.ok) expect(tooBig.errors[0]).toMatch(/larger than/);
  });

  test("rejects too many steps", () => {
    const doc = fixture("sample");
    doc.steps = Array.from({ length: LIMITS.maxSteps + 1 }, () => doc.steps[1]!);
    const result = validateDocument(doc);
    expect(result).toEqual({
      ok: false,
      errors: [`steps has ${LIMITS.maxSteps + 1} entries (at most ${LIMITS.maxSteps})`],
    });
  });

  test("reports at most ten problems", () => {
    const doc = fixture("sample") as unknown as { steps: { nodes: Record<string, unknown>[] }[] };
    for (const step of doc.steps) for (const n of step.nodes) n.uid = "x";
    const result = validateDocument(doc);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors).toHaveLength(10);
  });
});
