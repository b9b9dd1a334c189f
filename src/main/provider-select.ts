import { UsageError } from '../shared/errors.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import type { ScriptedModelOptions } from '../testing/index.js';
import { type ParsedValues, stringFlag } from './cli-options.js';

export interface SelectedProvider {
  kind: 'anthropic' | 'mock';
  config: Partial<ProviderConfig>;
  /** Stops the in-process scripted model, when one was started. */
  close(): Promise<void>;
}

/**
 * Picks the provider (DESIGN §3): `--provider` when given; else `anthropic` when
 * ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL is set; else the scripted model, started in-process and
 * announced by one line on stderr.
 */
export async function selectProvider(
  values: ParsedValues,
  options: {
    env?: NodeJS.ProcessEnv;
    notice?: (line: string) => void;
    /** Load settings for the in-process scripted model (the demo makes latency visible). */
    mockLoad?: ScriptedModelOptions;
  } = {},
): Promise<SelectedProvider> {
  const env = options.env ?? process.env;
  const notice = options.notice ?? ((line: string) => process.stderr.write(`${line}\n`));
  const requested = stringFlag(values, 'provider');
  if (requested !== undefined && requested !== 'anthropic' && requested !== 'mock') {
    throw new UsageError(`Expected \`--provider\` to be anthropic or mock, got \`${requested}\``);
  }
  const model = stringFlag(values, 'model');
  const baseURL = stringFlag(values, 'base-url');
  const config: Partial<ProviderConfig> = {
    ...(model === undefined ? {} : { model }),
    ...(baseURL === undefined ? {} : { baseURL }),
  };
  const kind =
    requested ?? (env.ANTHROPIC_API_KEY || env.ANTHROPIC_BASE_URL ? 'anthropic' : 'mock');
  if (kind === 'anthropic' || baseURL !== undefined) {
    return { kind: 'anthropic', config, close: async () => {} };
  }
  const { startScriptedModel } = await import('../testing/index.js');
  const server = await startScriptedModel({ ...options.mockLoad, port: 0 });
  notice(
    `cohort: no ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL set; using the built-in scripted model at ${server.url}`,
  );
  return {
    kind: 'mock',
    config: { model: 'cohort-scripted', ...config, baseURL: server.url },
    close: () => server.close(),
  };
}
