import type { ProviderConfig } from '../../shared/provider/config.js';
import { durationFlag, intFlag, type ParsedValues, stringFlag } from '../cli-options.js';
import type { EngineOptions } from '../engine.js';

/** Engine options from the common flags. */
export function engineOptionsFrom(
  values: ParsedValues,
  provider: Partial<ProviderConfig>,
): EngineOptions {
  const threads = intFlag(values, 'threads', 1, 256);
  const agentsPerThread = intFlag(values, 'agents-per-thread', 1);
  const maxDepth = intFlag(values, 'max-depth', 0, 8);
  const ceilingMs = durationFlag(values, 'ceiling');
  const logDir = stringFlag(values, 'log-dir');
  const workspace = stringFlag(values, 'workspace');
  const tools = values.tools as string[] | undefined;
  const heap = intFlag(values, 'worker-heap-mb', 16);
  const grace = durationFlag(values, 'cancel-grace');
  return {
    provider,
    ...(threads === undefined ? {} : { threads }),
    ...(agentsPerThread === undefined ? {} : { agentsPerThread }),
    ...(maxDepth === undefined ? {} : { maxDepth }),
    ...(ceilingMs === undefined ? {} : { ceilingMs }),
    ...(logDir === undefined ? {} : { logDir }),
    ...(workspace === undefined ? {} : { workspace }),
    ...(tools === undefined ? {} : { toolModules: tools }),
    ...(heap === undefined ? {} : { maxOldGenerationSizeMb: heap }),
    ...(grace === undefined ? {} : { cancelGraceMs: grace }),
  };
}
