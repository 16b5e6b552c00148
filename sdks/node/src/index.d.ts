import type { IncomingMessage, ServerResponse } from 'node:http';

/** Everything a handler knows about the execution it runs. */
export interface JobContext {
  traceId: string;
  executionId: string;
  jobName: string;
  handler: string;
  /** CRON, MANUAL, RETRY, COMPENSATION or CHILD. */
  triggerType: string;
  fireTime: Date;
  shardStart: number;
  shardEnd: number;
  shardCount: number;
  /** MOD_HASH, RANGE or CUSTOM. */
  shardStrategy: string;
  retryCount: number;
  timeoutSeconds: number;
  jobParams: unknown;
  /** RANGE jobs: the slice of the data range this execution owns. */
  dataRange: { start: number; end: number } | null;
  /** CUSTOM jobs: the item parameter of each shard of this execution. */
  shardItems: Record<number, string>;
  reportUrl: string;
  /** Aborts at the job's timeoutSeconds or when the scheduler cancels the execution. */
  signal: AbortSignal;
  /** Adds a line to this execution's log, shipped to the scheduler. */
  log(message: string, level?: 'TRACE' | 'DEBUG' | 'INFO' | 'WARN' | 'ERROR'): void;
  /** MOD_HASH: whether a record belongs to this execution (`id % shardCount` in range). */
  ownsId(id: number | bigint): boolean;
}

export class JobResult {
  constructor(success: boolean, message?: string, status?: 'SUCCESS' | 'FAILED' | 'TIMEOUT' | 'CANCELLED');
  readonly success: boolean;
  readonly message?: string;
  readonly status?: string;
  static ok(message?: string): JobResult;
  static failure(message: string): JobResult;
  static timedOut(seconds: number): JobResult;
  static cancelled(): JobResult;
  get finalStatus(): string;
}

/** A string: SUCCESS with that message; undefined: SUCCESS; a JobResult as it is. */
export type HandlerResult = JobResult | string | undefined | null | object;
export type Handler = (ctx: JobContext) => Promise<HandlerResult> | HandlerResult;

export interface JobExecutorOptions {
  /** The scheduler's executor.signing_secret; null accepts unsigned calls. */
  secret: string | Buffer | null;
  pathPrefix?: string;
  keepAtLeast?: number;
  keepForMs?: number;
  keepAtMost?: number;
  stopWaitMs?: number;
  reportAttempts?: number;
  log?: Pick<Console, 'warn' | 'error'>;
  /** Bytes of log messages each execution keeps and ships (default 1 MiB; 0: none). */
  logBound?: number;
}

export class JobExecutor {
  constructor(options: JobExecutorOptions);
  handler(name: string, fn: Handler): this;
  backgroundHandler(name: string, fn: Handler): this;
  listener(): (req: IncomingMessage, res: ServerResponse) => void;
  middleware(): (req: IncomingMessage, res: ServerResponse, next: () => void) => void;
  handle(method: string, path: string, headers: Record<string, string>, body: Buffer,
    callerGone?: Promise<void>): Promise<[number, object]>;
  report(url: string, traceId: string, result: JobResult): Promise<boolean>;
}

export function sign(secret: string | Buffer, method: string, path: string, timestamp: string,
  traceId: string, body: Buffer | string): string;
export function verify(secret: string | Buffer, method: string, path: string,
  headers: Record<string, string | undefined>, traceId: string, body: Buffer,
  nowSeconds?: number): boolean;
export function parseCall(body: object): Omit<JobContext, 'signal'>;

export interface NacosOptions {
  /** One Nacos address or several, comma-separated ("nacos:8848" or a URL). */
  serverAddr: string;
  serviceName: string;
  /** Where schedulers reach this executor. */
  ip: string;
  port: number;
  /** Default public (Nacos' default namespace, whose id is empty). */
  namespace?: string;
  /** Default DEFAULT_GROUP. */
  group?: string;
  /** Announced as jobflow.path-prefix when not /internal/job. */
  pathPrefix?: string;
  username?: string;
  password?: string;
  timeoutMs?: number;
  logger?: Pick<Console, 'warn' | 'info'>;
}

export class NacosError extends Error {}

/** This executor as an ephemeral instance in Nacos, kept by beats. */
export class NacosRegistration {
  constructor(options: NacosOptions);
  /** Registers and starts beating; rejects with NacosError when Nacos refuses. */
  start(): Promise<this>;
  /** Stops beating and removes the instance. */
  close(): Promise<void>;
}

export const DEFAULT_LOG_BOUND: number;
