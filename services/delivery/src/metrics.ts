import { prometheus, registry } from '@mail/common';

/** What the senders of this process did (one series per outcome), for dashboards and alerts. */
export const deliveryMetrics = {
  messages: new prometheus.Counter({
    name: 'delivery_messages_total',
    help: 'Recipients settled by this process, by outcome (sent, failed, retried, unknown, suppressed)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  sentEventsPublished: new prometheus.Counter({
    name: 'delivery_sent_events_published_total',
    help: 'Sent events published to the events topic',
    registers: [registry],
  }),
  bounceEventsPublished: new prometheus.Counter({
    name: 'delivery_bounce_events_published_total',
    help: 'Bounce and spam report events published to the events topic, by source (smtp: the server refused at hand-over; mailbox: a report in the bounce mailbox)',
    labelNames: ['source'] as const,
    registers: [registry],
  }),
  bounceMailboxMessages: new prometheus.Counter({
    name: 'delivery_bounce_mailbox_messages_total',
    help: 'Messages read from the bounce mailbox, by outcome (matched: a bounce or spam report of a message of a run, stored and removed; unmatched: kept in the mailbox, counted once by each process that reads it)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  }),
  bounceMailboxReadFailures: new prometheus.Counter({
    name: 'delivery_bounce_mailbox_read_failures_total',
    help: 'Reads of the bounce mailbox that failed (the POP3 server unreachable or refusing, Kafka down); the next interval tries again',
    registers: [registry],
  }),
  loadsRunning: new prometheus.Gauge({
    name: 'delivery_recipient_loads_running',
    help: 'Runs whose recipients this process is reading from their recipient database now',
    registers: [registry],
  }),
  runsWaitingForSource: new prometheus.Gauge({
    name: 'delivery_runs_waiting_for_source',
    help: 'Runs, across every replica, whose recipient database could not be reached and whose load waits to be tried again',
    registers: [registry],
  }),
  runsFailed: new prometheus.Counter({
    name: 'delivery_runs_failed_total',
    help: 'Runs this process failed while sending, by cause (source: the recipient database refused, timed out, hit a limit or stayed unreachable; template: no message of its first batch could be rendered)',
    labelNames: ['cause'] as const,
    registers: [registry],
  }),
};
