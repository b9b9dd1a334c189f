import type { ProviderConfig } from '../config.js';
import { SdkTransport } from './sdk-transport.js';
import type { Transport } from './types.js';
import { UndiciTransport } from './undici-transport.js';

export * from './types.js';

/**
 * The transport `config.transport` names (`undici` when unset). One per provider config per
 * thread: it holds that config's connections until `close()`.
 */
export function createTransport(config: ProviderConfig): Transport {
  return config.transport === 'sdk' ? new SdkTransport(config) : new UndiciTransport(config);
}
