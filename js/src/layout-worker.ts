/**
 * Web Worker entry: lays out the steps of a document off the main thread.
 *
 * Layer: front-end worker; imports only the pure layout. Bundled on its own by build.mjs and
 * inlined into the entries as text (started from a Blob URL, so nothing is fetched).
 * Protocol: receives `{steps: LayoutStepInput[]}`, posts `{index, ids, layer, col}` per step in
 * order (the cell arrays are transferred).
 */
import { LayoutEngine, type LayoutStepInput } from "./layout";

interface WorkerScope {
  onmessage: ((e: MessageEvent<{ steps: LayoutStepInput[] }>) => void) | null;
  postMessage(message: unknown, transfer: Transferable[]): void;
}

const scope = self as unknown as WorkerScope;

scope.onmessage = (e) => {
  const engine = new LayoutEngine();
  e.data.steps.forEach((step, index) => {
    const { ids, layer, col } = engine.layoutStep(step);
    scope.postMessage({ index, ids, layer, col }, [layer.buffer, col.buffer]);
  });
};
