import type { ProviderConfig } from '../config.js';
import { SdkTransport } from './sdk-transport.js';
import type { Transport } from './types.js';
import { UndiciTransport } from './undici-transport.js';

export * from './types.js';

/**
 * The transport `config.transport` names (`undici` when unset). One per provider config (and key)
 * per thread: it holds that config's connections until `close()`. `apiKey` is a key given in
 * code; unset, the environment's credential is sent.
 */
export function createTransport(config: ProviderConfig, apiKey?: string): Transport {
  return config.transport === 'sdk'
    ? new SdkTransport(config, apiKey)
    : new UndiciTransport(config, apiKey);
}
