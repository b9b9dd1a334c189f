import { PROVIDER_FIELDS } from '../main/engine-options.js';
import { UsageError } from '../shared/errors.js';
import { defined } from '../shared/option-schema.js';
import type { ProviderConfig } from '../shared/provider/config.js';
import type { ScriptedModelOptions } from '../testing/index.js';
import { type CliFlag, type ParsedValues, stringFlag } from './flags.js';

/** `--provider`: which provider the engine commands use. */
export const PROVIDER_FLAG: CliFlag = {
  flag: '--provider',
  arg: 'anthropic|mock',
  help: 'default: anthropic when ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL\nis set, else the built-in scripted model (announced on stderr)',
};

export interface ProviderChoice {
  kind: 'anthropic' | 'mock';
  /** The settings from the flags; the built-in model's base URL is added when it starts. */
  config: Partial<ProviderConfig>;
}

export interface SelectedProvider extends ProviderChoice {
  /** Stops the in-process scripted model, when one was started. Idempotent. */
  close(): Promise<void>;
}

/**
 * Picks the provider without starting anything: `--provider` when given; else
 * `anthropic` when ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) or ANTHROPIC_BASE_URL is set or
 * `--base-url` is given; else the built-in scripted model. `anthropic` with neither a key nor a
 * base URL is refused: it could only end in an authentication failure per request.
 */
export function chooseProvider(
  values: ParsedValues,
  env: NodeJS.ProcessEnv = process.env,
): ProviderChoice {
  const requested = stringFlag(values, PROVIDER_FLAG);
  if (requested !== undefined && requested !== 'anthropic' && requested !== 'mock') {
    throw new UsageError(`Expected \`--provider\` to be anthropic or mock, got \`${requested}\``);
  }
  const model = stringFlag(values, PROVIDER_FIELDS.model);
  const baseURL = stringFlag(values, PROVIDER_FIELDS.baseURL);
  if (baseURL !== undefined) checkBaseUrl(baseURL, '--base-url');
  if (env.ANTHROPIC_BASE_URL) checkBaseUrl(env.ANTHROPIC_BASE_URL, 'ANTHROPIC_BASE_URL');
  const config: Partial<ProviderConfig> = defined({ model, baseURL });
  // A bearer token counts as a key: the transports send it when no key is set.
  const credential = env.ANTHROPIC_API_KEY || env.ANTHROPIC_AUTH_TOKEN;
  const fromEnv = Boolean(credential || env.ANTHROPIC_BASE_URL);
  const kind = requested ?? (fromEnv || baseURL !== undefined ? 'anthropic' : 'mock');
  if (kind === 'mock' && baseURL !== undefined) {
    throw new UsageError(
      'Expected either `--provider mock` (the built-in model) or `--base-url`, got both',
    );
  }
  if (kind === 'anthropic' && !credential && !env.ANTHROPIC_BASE_URL && !baseURL) {
    throw new UsageError(
      'Expected ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN (or `--base-url` / ANTHROPIC_BASE_URL) with `--provider anthropic`, got none',
    );
  }
  // The built-in model's name is known now: the start-up check prices budgets by it.
  return { kind, config: kind === 'mock' ? { model: MOCK_MODEL, ...config } : config };
}

/** The model name the built-in scripted model runs under unless `--model` says otherwise. */
const MOCK_MODEL = 'cohort-scripted';

/** Starts what the choice needs: the built-in scripted model, announced by one line on stderr. */
export async function startProvider(
  choice: ProviderChoice,
  options: { notice: (line: string) => void; mockLoad?: ScriptedModelOptions },
): Promise<SelectedProvider> {
  if (choice.kind === 'anthropic') return { ...choice, close: async () => {} };
  const { startScriptedModel } = await import('../testing/index.js');
  const server = await startScriptedModel({ ...options.mockLoad, port: 0 });
  options.notice(
    `cohort: no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL set; using the built-in scripted model at ${server.url}`,
  );
  let closing: Promise<void> | undefined;
  return {
    kind: 'mock',
    config: { model: MOCK_MODEL, ...choice.config, baseURL: server.url },
    close: () => {
      closing ??= server.close();
      return closing;
    },
  };
}

/** A base URL must parse and speak http or https; anything else would only fail per request. */
function checkBaseUrl(value: string, name: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`Expected \`${name}\` to be an http(s) URL, got \`${value}\``);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(
      `Expected \`${name}\` to be an http(s) URL, got the protocol \`${url.protocol}\` in \`${value}\``,
    );
  }
}
