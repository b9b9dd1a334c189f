import type { TracerProvider } from '@opentelemetry/api';

/** Spans exported so far in this process, to check that a traced run did trace. */
export let exportedSpans = 0;

/**
 * A tracer provider for measuring what tracing costs: the real SDK with a span processor that
 * hands each ended span to an exporter which counts it and lets it go, so the figure is cohort's
 * recording and replay plus the SDK's span work, not an exporter's I/O.
 */
export async function countingTracerProvider(): Promise<TracerProvider> {
  const sdk = await import('@opentelemetry/sdk-trace');
  const exporter: import('@opentelemetry/sdk-trace').SpanExporter = {
    export(batch, done) {
      exportedSpans += batch.length;
      done({ code: 0 });
    },
    shutdown: async () => {},
  };
  return new sdk.TracerProvider({ spanProcessors: [new sdk.SimpleSpanProcessor({ exporter })] });
}
