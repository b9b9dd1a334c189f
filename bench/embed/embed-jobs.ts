/** What crosses between the `embed` part and its service process. */
import type { ProbeFigures } from '../common/probes.js';

/** The engines a service is built on. */
export const EMBED_ENGINES = ['cohort', 'sdk-loop'] as const;
export type EmbedEngine = (typeof EMBED_ENGINES)[number];

export interface EmbedServiceConfig {
  engine: EmbedEngine;
  modelUrl: string;
  logDir: string;
}

/** A job's answer: its agents' outcomes, counted. */
export interface JobAnswer {
  outcomes: Record<string, number>;
}

/** The service process's own figures over the measured window. */
export interface EmbedFigures extends ProbeFigures {
  /** Main-thread and worker CPU of the service process, ms. */
  cpuMs: number;
}
