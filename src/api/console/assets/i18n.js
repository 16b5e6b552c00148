// Labels in English and Simplified Chinese. The language comes from the browser
// (navigator.language) until the user picks one with the switch; the choice is remembered.

const LANG_KEY = 'jobflow.lang';

const en = {
  'nav.overview': 'Overview', 'nav.jobs': 'Jobs', 'nav.executions': 'Executions', 'nav.cluster': 'Cluster',
  'lang.switch': '中文', 'lang.switchLabel': 'Switch to Chinese',
  'skip': 'Skip to content',
  'signin.title': 'Sign in', 'signin.token': 'Token', 'signin.submit': 'Sign in', 'signout': 'Sign out',
  'signin.help': 'Paste an API token from auth.tokens. It is kept for this browser session only.',
  'signin.rejected': 'That token was not accepted.',
  'signin.expired': 'Your token is no longer accepted; sign in again.',
  'who': '{name} ({role})', 'who.open': 'authentication off',
  'role.viewer': 'viewer', 'role.operator': 'operator', 'role.admin': 'admin',
  'action.trigger': 'Trigger', 'action.enable': 'Enable', 'action.disable': 'Disable', 'action.edit': 'Edit',
  'action.delete': 'Delete', 'action.retry': 'Retry', 'action.cancel': 'Cancel', 'action.create': 'New job',
  'action.save': 'Save', 'action.search': 'Search', 'action.refresh': 'Refresh', 'action.back': 'Back',
  'dialog.keep': 'Keep', 'loading': 'Loading…', 'none': 'None', 'yes': 'yes', 'no': 'no',
  'pager.label': 'Pages', 'pager.prev': 'Previous', 'pager.next': 'Next',
  'pager.position': 'Page {page} of {pages} ({total} in all)',
  'status.PENDING': 'PENDING', 'status.RUNNING': 'RUNNING', 'status.SUCCESS': 'SUCCESS', 'status.FAILED': 'FAILED',
  'status.TIMEOUT': 'TIMEOUT', 'status.CANCELLED': 'CANCELLED', 'status.SKIPPED': 'SKIPPED',
  'overview.title': 'Overview', 'overview.instances': 'Scheduler instances', 'overview.instance': 'Instance',
  'overview.ownedJobs': 'Jobs owned', 'overview.leader': 'compensation leader', 'overview.self': 'this instance',
  'overview.jobs': 'Jobs', 'overview.jobsValue': '{total} ({enabled} enabled)',
  'overview.fires': 'Fires, last hour', 'overview.failures': 'Failures, last hour',
  'overview.executions': 'Executions, last hour', 'overview.delay': 'Fire delay',
  'overview.delayValue': '{latest} latest · {average} average · {max} max ({samples} fires)',
  'overview.noDelay': 'no cron fire in the last hour',
  'overview.executors': 'Executors per service', 'overview.service': 'Service', 'overview.serviceJobs': 'Jobs',
  'overview.serviceInstances': 'Live instances', 'overview.noExecutors': 'none: fires of these jobs fail',
  'jobs.title': 'Jobs', 'jobs.namePrefix': 'Name starts with', 'jobs.service': 'Service', 'jobs.enabled': 'Enabled',
  'jobs.any': 'Any', 'jobs.onlyEnabled': 'Enabled', 'jobs.onlyDisabled': 'Disabled', 'jobs.name': 'Name',
  'jobs.cron': 'Schedule', 'jobs.nextFire': 'Next fire', 'jobs.lastResult': 'Last result', 'jobs.empty': 'No jobs match.',
  'jobs.paused': 'disabled',
  'job.definition': 'Definition', 'job.nextFires': 'Next 10 fire times ({tz})', 'job.history': 'History',
  'backfill.title': 'Backfills', 'backfill.none': 'No backfill of this job yet.',
  'backfill.id': 'Backfill', 'backfill.interval': 'Instants', 'backfill.progress': 'Progress',
  'backfill.status': 'Status', 'backfill.by': 'Started by',
  'backfill.from': 'From', 'backfill.to': 'To (not included)', 'backfill.pace': 'Instants per second',
  'backfill.start': 'Run past instants again', 'backfill.started': 'Backfill started: {fires} instant(s).',
  'backfill.cancelled': 'Backfill cancelled.', 'status.DONE': 'DONE',
  'job.params': 'Parameters (JSON, optional)', 'job.triggered': 'Triggered: {n} execution(s) created.',
  'job.skipped': 'Not run: the job still runs and its overlap policy is SKIP ({n} execution(s) recorded SKIPPED).',
  'job.enabledNow': 'Job enabled.', 'job.disabledNow': 'Job disabled.', 'job.deleted': 'Job {name} deleted.',
  'job.confirmDelete': 'Delete job {name}? Its execution history is kept.', 'job.status': 'Status',
  'job.invalidParams': 'Parameters must be JSON: {message}', 'job.notFound': 'No such job.',
  'form.createTitle': 'New job', 'form.editTitle': 'Edit {name}', 'form.saved': 'Saved.',
  'form.preview': 'Next fire times', 'form.previewHint': 'Quartz (with seconds) or Unix cron.',
  'form.startAtHint': 'RFC 3339 with an offset; for a fixed rate, empty means from creation.',
  'f.scheduleType': 'Schedule type', 'f.intervalSeconds': 'Interval (seconds)', 'f.startAt': 'Start at',
  'schedule.fixedRate': 'every {seconds} s', 'schedule.from': 'from', 'schedule.once': 'once at',
  'schedule.none': 'only when triggered', 'schedule.noMore': 'none to come',
  'form.invalidJson': 'must be JSON: {message}', 'form.listHint': 'Names separated by commas.', 'form.failed': 'The job was not saved: {message}',
  'f.name': 'Name', 'f.serviceName': 'Executor service', 'f.serviceGroup': 'Nacos group', 'f.calendar': 'Calendar', 'f.calendarNone': 'every date', 'f.serviceGroupDefault': 'the scheduler\'s group', 'f.handler': 'Handler', 'f.cron': 'Cron',
  'f.timezone': 'Time zone', 'f.enabled': 'Enabled', 'f.shardCount': 'Shards', 'f.shardStrategy': 'Shard strategy',
  'f.shardParams': 'Shard parameters (JSON)', 'f.jobParams': 'Job parameters (JSON)',
  'f.timeoutSeconds': 'Timeout (seconds)', 'f.maxRetry': 'Retries', 'f.misfirePolicy': 'Misfire policy',
  'f.description': 'Description', 'f.routeStrategy': 'Route strategy', 'f.overlapPolicy': 'Overlap policy',
  'f.childJobs': 'Child jobs', 'f.alertChannels': 'Alert channels', 'f.createdBy': 'Created by',
  'f.updatedBy': 'Updated by', 'f.createdAt': 'Created', 'f.updatedAt': 'Updated', 'f.source': 'Source',
  'exec.title': 'Executions', 'exec.job': 'Job', 'exec.status': 'Status', 'exec.triggerType': 'Trigger',
  'exec.from': 'From', 'exec.to': 'To', 'exec.executor': 'Executor', 'exec.all': 'All',
  'exec.triggerTime': 'Triggered', 'exec.fireTime': 'Fire time', 'exec.shards': 'Shards', 'exec.duration': 'Duration',
  'exec.trace': 'Trace id', 'exec.empty': 'No executions match.', 'exec.executionId': 'Execution id',
  'exec.scheduler': 'Scheduler', 'exec.start': 'Started', 'exec.finish': 'Finished', 'exec.retryCount': 'Retry',
  'exec.result': 'Result', 'exec.error': 'Error', 'exec.chain': 'Retry chain', 'exec.parent': 'Retry of',
  'exec.params': 'Job params', 'exec.paramsOfJob': 'the job\'s own',
  'exec.retried': 'Retry started.', 'exec.cancelled': 'Execution cancelled.', 'exec.shardRange': '{start}–{end} of {count}',
  'exec.searchUnavailable': 'This server does not offer the execution search yet: {message}',
  'cluster.title': 'Cluster', 'cluster.members': 'Members', 'cluster.spread': 'Ownership spread',
  'cluster.strategy': 'Ownership strategy: {strategy}', 'cluster.owner': 'Owner', 'cluster.find': 'Which instance owns a job?',
  'cluster.findPlaceholder': 'job name', 'cluster.nobody': 'nobody (disabled or no instance)',
  'cluster.jobs': 'Jobs and owners', 'cluster.shown': 'Showing {shown} of {total}.',
  'error.title': 'Something went wrong', 'error.notFound': 'There is no such page.',
};

const zh = {
  'nav.overview': '概览', 'nav.jobs': '任务', 'nav.executions': '执行记录', 'nav.cluster': '集群',
  'lang.switch': 'English', 'lang.switchLabel': '切换到英文',
  'skip': '跳到正文',
  'signin.title': '登录', 'signin.token': '令牌', 'signin.submit': '登录', 'signout': '退出登录',
  'signin.help': '粘贴 auth.tokens 中的 API 令牌，仅在本次浏览器会话中保存。',
  'signin.rejected': '令牌无效。',
  'signin.expired': '令牌已失效，请重新登录。',
  'who': '{name}（{role}）', 'who.open': '未启用认证',
  'role.viewer': '只读', 'role.operator': '运维', 'role.admin': '管理员',
  'action.trigger': '触发', 'action.enable': '启用', 'action.disable': '停用', 'action.edit': '编辑',
  'action.delete': '删除', 'action.retry': '重试', 'action.cancel': '取消', 'action.create': '新建任务',
  'action.save': '保存', 'action.search': '查询', 'action.refresh': '刷新', 'action.back': '返回',
  'dialog.keep': '保留', 'loading': '加载中…', 'none': '无', 'yes': '是', 'no': '否',
  'pager.label': '分页', 'pager.prev': '上一页', 'pager.next': '下一页',
  'pager.position': '第 {page} / {pages} 页（共 {total} 条）',
  'status.PENDING': '等待中', 'status.RUNNING': '运行中', 'status.SUCCESS': '成功', 'status.FAILED': '失败',
  'status.TIMEOUT': '超时', 'status.CANCELLED': '已取消', 'status.SKIPPED': '已跳过',
  'overview.title': '概览', 'overview.instances': '调度实例', 'overview.instance': '实例',
  'overview.ownedJobs': '负责任务数', 'overview.leader': '补偿主节点', 'overview.self': '当前实例',
  'overview.jobs': '任务', 'overview.jobsValue': '{total}（启用 {enabled}）',
  'overview.fires': '近一小时触发', 'overview.failures': '近一小时失败',
  'overview.executions': '近一小时执行', 'overview.delay': '触发延迟',
  'overview.delayValue': '最近 {latest} · 平均 {average} · 最大 {max}（{samples} 次触发）',
  'overview.noDelay': '近一小时没有定时触发',
  'overview.executors': '各服务的执行器', 'overview.service': '服务', 'overview.serviceJobs': '任务数',
  'overview.serviceInstances': '在线实例', 'overview.noExecutors': '无：这些任务的触发会失败',
  'jobs.title': '任务', 'jobs.namePrefix': '名称前缀', 'jobs.service': '服务', 'jobs.enabled': '状态',
  'jobs.any': '全部', 'jobs.onlyEnabled': '已启用', 'jobs.onlyDisabled': '已停用', 'jobs.name': '名称',
  'jobs.cron': '调度', 'jobs.nextFire': '下次触发', 'jobs.lastResult': '最近结果', 'jobs.empty': '没有匹配的任务。',
  'jobs.paused': '已停用',
  'job.definition': '定义', 'job.nextFires': '接下来 10 次触发时间（{tz}）', 'job.history': '执行历史',
  'backfill.title': '补跑', 'backfill.none': '该任务还没有补跑。',
  'backfill.id': '补跑', 'backfill.interval': '时间段', 'backfill.progress': '进度',
  'backfill.status': '状态', 'backfill.by': '发起人',
  'backfill.from': '开始', 'backfill.to': '结束（不含）', 'backfill.pace': '每秒触发数',
  'backfill.start': '补跑过去的触发时间', 'backfill.started': '补跑已开始：共 {fires} 次触发。',
  'backfill.cancelled': '补跑已取消。', 'status.DONE': '完成',
  'job.params': '参数（JSON，可选）', 'job.triggered': '已触发：创建了 {n} 条执行记录。',
  'job.skipped': '未运行：任务仍在运行，重叠策略为 SKIP（记录了 {n} 条 SKIPPED 执行记录）。',
  'job.enabledNow': '任务已启用。', 'job.disabledNow': '任务已停用。', 'job.deleted': '任务 {name} 已删除。',
  'job.confirmDelete': '删除任务 {name}？执行历史会保留。', 'job.status': '状态',
  'job.invalidParams': '参数必须是 JSON：{message}', 'job.notFound': '任务不存在。',
  'form.createTitle': '新建任务', 'form.editTitle': '编辑 {name}', 'form.saved': '已保存。',
  'form.preview': '接下来的触发时间', 'form.previewHint': 'Quartz（含秒）或 Unix cron 表达式。',
  'form.startAtHint': 'RFC 3339，带时区偏移；固定频率留空表示从创建时开始。',
  'f.scheduleType': '调度类型', 'f.intervalSeconds': '间隔（秒）', 'f.startAt': '开始时间',
  'schedule.fixedRate': '每 {seconds} 秒', 'schedule.from': '起始', 'schedule.once': '仅一次：',
  'schedule.none': '仅手动触发', 'schedule.noMore': '之后不再触发',
  'form.invalidJson': '必须是 JSON：{message}', 'form.listHint': '多个名称用逗号分隔。', 'form.failed': '任务未保存：{message}',
  'f.name': '名称', 'f.serviceName': '执行器服务', 'f.serviceGroup': 'Nacos 分组', 'f.calendar': '日历', 'f.calendarNone': '每天', 'f.serviceGroupDefault': '调度器的分组', 'f.handler': '处理器', 'f.cron': 'Cron 表达式',
  'f.timezone': '时区', 'f.enabled': '启用', 'f.shardCount': '分片数', 'f.shardStrategy': '分片策略',
  'f.shardParams': '分片参数（JSON）', 'f.jobParams': '任务参数（JSON）',
  'f.timeoutSeconds': '超时（秒）', 'f.maxRetry': '重试次数', 'f.misfirePolicy': '错过触发策略',
  'f.description': '描述', 'f.routeStrategy': '路由策略', 'f.overlapPolicy': '重叠策略',
  'f.childJobs': '子任务', 'f.alertChannels': '告警渠道', 'f.createdBy': '创建人',
  'f.updatedBy': '修改人', 'f.createdAt': '创建时间', 'f.updatedAt': '修改时间', 'f.source': '来源',
  'exec.title': '执行记录', 'exec.job': '任务', 'exec.status': '状态', 'exec.triggerType': '触发方式',
  'exec.from': '开始', 'exec.to': '结束', 'exec.executor': '执行器', 'exec.all': '全部',
  'exec.triggerTime': '触发时间', 'exec.fireTime': '计划时间', 'exec.shards': '分片', 'exec.duration': '耗时',
  'exec.trace': 'Trace ID', 'exec.empty': '没有匹配的执行记录。', 'exec.executionId': '执行 ID',
  'exec.scheduler': '调度实例', 'exec.start': '开始时间', 'exec.finish': '结束时间', 'exec.retryCount': '重试',
  'exec.result': '结果', 'exec.error': '错误', 'exec.chain': '重试链', 'exec.parent': '重试自',
  'exec.params': '任务参数', 'exec.paramsOfJob': '沿用任务的参数',
  'exec.retried': '已发起重试。', 'exec.cancelled': '执行已取消。', 'exec.shardRange': '{start}–{end} / 共 {count}',
  'exec.searchUnavailable': '此服务器尚不支持执行记录查询：{message}',
  'cluster.title': '集群', 'cluster.members': '成员', 'cluster.spread': '任务分布',
  'cluster.strategy': '归属策略：{strategy}', 'cluster.owner': '负责实例', 'cluster.find': '某个任务由哪个实例负责？',
  'cluster.findPlaceholder': '任务名', 'cluster.nobody': '无（已停用或无可用实例）',
  'cluster.jobs': '任务与负责实例', 'cluster.shown': '显示 {shown} / {total}。',
  'error.title': '出错了', 'error.notFound': '页面不存在。',
};

const DICTS = { en, zh };

function initial() {
  const saved = localStorage.getItem(LANG_KEY);
  if (saved && DICTS[saved]) return saved;
  return (navigator.language || 'en').toLowerCase().startsWith('zh') ? 'zh' : 'en';
}

let current = initial();

export const lang = () => current;

export function setLang(code) {
  current = DICTS[code] ? code : 'en';
  localStorage.setItem(LANG_KEY, current);
  document.documentElement.lang = current === 'zh' ? 'zh-CN' : 'en';
}

/// The label for `key` in the current language, with `{name}` placeholders filled in.
export function t(key, vars) {
  const text = DICTS[current][key] ?? en[key] ?? key;
  return vars ? text.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m)) : text;
}
