import { statSync } from 'node:fs';
import path from 'node:path';
import type { TracerProvider } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import { expected, UsageError } from '../../shared/errors.js';
import { redactSecrets } from '../../shared/redact.js';

/** The path every OTLP/HTTP collector takes traces on. */
const TRACES_PATH = '/v1/traces';

/**
 * How long one export to the collector may take, retries included. The exporter's own default is
 * 10 s; the CLI waits for the last export before it exits, so a collector that is down would hold
 * every command that long. Half of it is still ample for a collector that answers at all.
 */
const EXPORT_TIMEOUT_MS = 5_000;

/**
 * The CLI's tracer provider for `--otel-endpoint URL` and/or `--trace-file FILE`.
 *
 * - `endpoint`: an OTLP/HTTP collector. The URL is used as given when it ends with `/v1/traces`;
 *   otherwise `/v1/traces` is appended (`http://localhost:4318` → `http://localhost:4318/v1/traces`),
 *   the way a collector's base address is usually written. Spans go through a BatchSpanProcessor.
 *   The exporter also reads the standard `OTEL_EXPORTER_OTLP_*` variables for headers.
 * - `file`: one OTLP/JSON line per span, appended (`FileSpanExporter`). Spans go through a
 *   SimpleSpanProcessor: each is written as it ends, so a run cut short still leaves every span
 *   that ended, and nothing is dropped (a batch processor drops spans past its queue limit, which a
 *   burst of agents can reach between two flushes).
 *
 * The resource is `service.name` = `cohort`. The OpenTelemetry SDK and exporters are loaded here
 * with `import()`, so the library, which needs only `@opentelemetry/api`, never loads them.
 *
 * `shutdown` flushes and closes both and never throws: a destination that failed (a collector
 * that cannot be reached, a file that cannot be written) gets one line on stderr naming it and the
 * cause, without the URL's credentials or query.
 */
export async function startCliTracing(options: {
  endpoint?: string;
  file?: string;
}): Promise<{ provider: TracerProvider; shutdown(): Promise<void> }> {
  const url = options.endpoint === undefined ? undefined : tracesUrl(options.endpoint);
  if (options.file !== undefined && options.file.trim() === '') {
    throw expected('--trace-file', 'a file path', options.file);
  }
  if (url === undefined && options.file === undefined) {
    throw new UsageError('Expected `--otel-endpoint` or `--trace-file` to be given, got neither');
  }
  const [sdk, resources] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/resources'),
  ]);
  const watched: WatchedExporter[] = [];
  const spanProcessors: SpanProcessor[] = [];
  if (url !== undefined) {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    const otlp = new OTLPTraceExporter({ url: url.href, timeoutMillis: EXPORT_TIMEOUT_MS });
    const exporter = new WatchedExporter(otlp, `could not send traces to ${shownUrl(url)}`);
    watched.push(exporter);
    spanProcessors.push(new sdk.BatchSpanProcessor({ exporter }));
  }
  if (options.file !== undefined) {
    const { FileSpanExporter } = await import('./trace-file.js');
    const file = new FileSpanExporter(options.file);
    const exporter = new WatchedExporter(file, `could not write the trace file ${options.file}`);
    watched.push(exporter);
    spanProcessors.push(new sdk.SimpleSpanProcessor({ exporter }));
  }
  const provider = new sdk.TracerProvider({
    resource: resources.resourceFromAttributes({ 'service.name': 'cohort' }),
    spanProcessors,
  });
  let closing: Promise<void> | undefined;
  return {
    provider,
    shutdown() {
      closing ??= shutdown(provider, watched);
      return closing;
    },
  };
}

async function shutdown(
  provider: { forceFlush(): Promise<void>; shutdown(): Promise<void> },
  watched: readonly WatchedExporter[],
): Promise<void> {
  let unattributed: unknown;
  for (const step of [() => provider.forceFlush(), () => provider.shutdown()]) {
    try {
      await step();
    } catch (error) {
      unattributed ??= error;
    }
  }
  let reported = false;
  for (const exporter of watched) {
    if (exporter.failure === undefined) continue;
    report(`${exporter.what}: ${causeOf(exporter.failure)}`);
    reported = true;
  }
  // A failure no exporter saw (a processor's own timeout): still say that spans may be missing.
  if (!reported && unattributed !== undefined) {
    report(`tracing did not shut down cleanly: ${causeOf(unattributed)}`);
  }
}

/**
 * Passes spans through to an exporter and keeps its first failure. The SDK hands export errors to
 * OpenTelemetry's global error handler, which prints nothing unless a diagnostic logger is set;
 * keeping the failure here lets `shutdown` say once, at the end, which destination lost spans.
 */
class WatchedExporter implements SpanExporter {
  readonly #exporter: SpanExporter;
  readonly what: string;
  failure: unknown;

  constructor(exporter: SpanExporter, what: string) {
    this.#exporter = exporter;
    this.what = what;
  }

  export(spans: ReadableSpan[], resultCallback: Parameters<SpanExporter['export']>[1]): void {
    this.#exporter.export(spans, (result) => {
      if (result.code !== 0) this.failure ??= result.error ?? new Error('the export failed');
      resultCallback(result);
    });
  }

  async forceFlush(): Promise<void> {
    await this.#exporter.forceFlush?.();
  }

  shutdown(): Promise<void> {
    return this.#exporter.shutdown();
  }
}

/**
 * Checks the tracing flags before anything starts: the endpoint is an http(s) URL, and the trace
 * file is not a folder and can be made (its folder exists). Throws a UsageError naming the flag.
 */
export function checkCliTracing(options: { endpoint?: string; file?: string }): void {
  if (options.endpoint !== undefined) tracesUrl(options.endpoint);
  const file = options.file;
  if (file === undefined) return;
  const folder = path.dirname(path.resolve(file));
  if (!isFolder(folder)) {
    throw new UsageError(
      `Expected \`--trace-file\` to be a file in an existing folder, got \`${file}\`, whose folder \`${folder}\` does not exist`,
    );
  }
  if (isFolder(file)) {
    throw new UsageError(
      `Expected \`--trace-file\` to be a file, got \`${file}\`, which is a folder`,
    );
  }
}

function isFolder(target: string): boolean {
  try {
    return statSync(target).isDirectory();
  } catch {
    return false;
  }
}

/** The collector's traces URL: `endpoint` as given, with `/v1/traces` appended when missing. */
function tracesUrl(endpoint: string): URL {
  let url: URL | undefined;
  try {
    url = new URL(endpoint);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    // Echoed without a user, password or query: they may carry a token.
    // Up to the last `@` before the path: a password may hold an `@` of its own.
    const shown = endpoint.replace(/\/\/[^/]*@/, '//…@').replace(/\?.*$/, '?…');
    throw expected('--otel-endpoint', 'an http or https URL', shown);
  }
  if (!url.pathname.endsWith(TRACES_PATH)) {
    url.pathname = `${url.pathname.replace(/\/+$/, '')}${TRACES_PATH}`;
  }
  return url;
}

/** The URL for a message: no user, password or query, which may carry a secret. */
function shownUrl(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

/** One line saying why, from whatever an exporter failed with. */
function causeOf(error: unknown): string {
  if (error instanceof AggregateError && error.message === '' && error.errors[0] !== undefined) {
    // Node's connection attempt to every address of a name (localhost: ::1 and 127.0.0.1).
    return causeOf(error.errors[0]);
  }
  let cause: string;
  if (error instanceof Error) {
    const code: unknown = (error as { code?: unknown }).code;
    // An HTTP answer: OTLPExporterError carries the status as a number, the message is its text.
    if (typeof code === 'number') cause = `HTTP ${code} ${error.message}`.trim();
    else cause = error.message || (typeof code === 'string' ? code : error.name);
  } else {
    cause = String(error);
  }
  return redactSecrets(cause).replace(/\s+/g, ' ').trim();
}

function report(line: string): void {
  process.stderr.write(`cohort: ${line}\n`);
}
