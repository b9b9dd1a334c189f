import { createWriteStream, type WriteStream } from 'node:fs';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';

type ExportCallback = Parameters<SpanExporter['export']>[1];
type ExportResult = Parameters<ExportCallback>[0];

// OpenTelemetry's ExportResultCode, by value: its package is not one of ours to import.
const SUCCESS: ExportResult['code'] = 0;
const FAILED: ExportResult['code'] = 1;

/**
 * Writes spans to a file, one JSON line per span, for a run without a collector
 * (`cohort … --trace-file FILE`; docs/TRACING.md). The file is opened for appending on the first
 * export, so a run that makes no span leaves no file, and a second run adds to the first.
 *
 * Each line is one OTLP/JSON `Span` exactly as OpenTelemetry's own JSON trace serializer writes
 * it (`traceId`, `spanId`, `parentSpanId`, `name`, `kind`, `startTimeUnixNano`,
 * `endTimeUnixNano`, `attributes`, `status`, …): hex ids, times as decimal strings of
 * nanoseconds. A root span has no `parentSpanId` field at all (absent, not ""). The resource
 * (`service.name`) and the instrumentation scope are left out: a line is a span and nothing else.
 *
 * The CLI loads this module with `import()` only (tracing.ts): the library never loads the
 * OpenTelemetry SDK packages it imports.
 */
export class FileSpanExporter implements SpanExporter {
  readonly #path: string;
  #stream: WriteStream | undefined;
  #lastWrite: Promise<void> = Promise.resolve();
  #shutdown: Promise<void> | undefined;

  constructor(path: string) {
    this.#path = path;
  }

  export(spans: ReadableSpan[], resultCallback: ExportCallback): void {
    if (this.#shutdown) {
      resultCallback({ code: FAILED, error: new Error('the trace file exporter is shut down') });
      return;
    }
    let lines: string;
    try {
      lines = spanLines(spans);
    } catch (error) {
      resultCallback({ code: FAILED, error: asError(error) });
      return;
    }
    if (lines === '') {
      resultCallback({ code: SUCCESS });
      return;
    }
    const stream = this.#open();
    this.#lastWrite = new Promise((resolve) => {
      // Called once the line is handed to the file, or with the error that stopped it (a file
      // that cannot be opened fails every write; the SDK reports the failed export).
      stream.write(lines, (error) => {
        resultCallback(error ? { code: FAILED, error } : { code: SUCCESS });
        resolve();
      });
    });
  }

  /** Resolves once every span exported so far is written (or has failed). */
  forceFlush(): Promise<void> {
    return this.#lastWrite;
  }

  /**
   * Flushes and closes the file. It never rejects: a write that failed was already reported as
   * its export's result.
   */
  shutdown(): Promise<void> {
    this.#shutdown ??= this.#close();
    return this.#shutdown;
  }

  async #close(): Promise<void> {
    await this.#lastWrite;
    const stream = this.#stream;
    if (!stream || stream.destroyed) return;
    await new Promise<void>((resolve) => {
      stream.end(() => resolve());
    });
  }

  #open(): WriteStream {
    if (!this.#stream) {
      this.#stream = createWriteStream(this.#path, { flags: 'a' });
      // Without a listener an open or write error would be thrown as an uncaught exception;
      // each write's callback carries it to the SDK instead.
      this.#stream.on('error', () => {});
    }
    return this.#stream;
  }
}

/** The spans as OTLP/JSON lines, each ending in a newline; '' when there is none. */
function spanLines(spans: ReadableSpan[]): string {
  const bytes = JsonTraceSerializer.serializeRequest(spans);
  if (!bytes) return '';
  const request = JSON.parse(new TextDecoder().decode(bytes)) as OtlpTraceRequest;
  let lines = '';
  for (const resource of request.resourceSpans ?? []) {
    for (const scope of resource.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) lines += `${JSON.stringify(span)}\n`;
    }
  }
  return lines;
}

/** The part of an OTLP/JSON ExportTraceServiceRequest that holds the spans. */
interface OtlpTraceRequest {
  resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[];
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
