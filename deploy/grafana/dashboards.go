package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// dashboards are voiceroom's dashboards: the overview, the event bus, the
// rooms cluster and the sinks.
func dashboards() []*dashboard.DashboardBuilder {
	return []*dashboard.DashboardBuilder{overview(), eventBus(), roomsCluster(), sinks()}
}

// rate is the range of the rates a panel computes itself, from the raw
// counters that recording.yml does not record.
const rate = "[$__rate_interval]"

func overview() *dashboard.DashboardBuilder {
	b := newBoard("voiceroom-overview", "voiceroom: overview",
		"Room commands, the HTTP API (requests, errors, latency) and whether MySQL, Redis and JetStream answer.")
	b.row("Dependencies")
	b.stat("MySQL up", "none", "The processes whose MySQL ping failed at the last scrape pull this to 0 (alert VoiceroomMySQLDown).",
		q("min(voiceroom_mysql_up)", "mysql"), upSteps)
	b.stat("Redis up", "none", "0 when a process could not PING Redis at the last scrape: lists and ranks are read from MySQL meanwhile (alert VoiceroomRedisDown).",
		q("min(voiceroom_redis_up)", "redis"), upSteps)
	b.stat("JetStream up", "none", "0 when a process could not reach JetStream at the last scrape (alert VoiceroomNATSDown).",
		q("min(voiceroom_nats_up)", "nats"), upSteps)
	b.stat("Rooms loaded", "short", "Rooms whose cell is in memory, over every rooms node.",
		q("sum(voiceroom_rooms_loaded)", "rooms"), nil)
	b.row("Room commands")
	b.series("Commands by outcome", "reqps", "Room commands per second, by outcome (OK, or the error kind).",
		q("sum by (outcome) (voiceroom:rooms_commands:rate5m)", "{{outcome}}"))
	b.series("Commands by kind (top 10)", "reqps", "The ten most frequent kinds of room command.",
		q("topk(10, sum by (kind) (voiceroom:rooms_commands:rate5m))", "{{kind}}"))
	b.series("Command latency", "s", "Time through the pipeline (apply, group commit), every kind.",
		quantiles("voiceroom:rooms_command_duration_seconds_bucket:rate5m")...)
	b.series("Group commit", "s", "Duration of one group transaction; the commands it carries on average.",
		q("histogram_quantile(0.99, voiceroom:rooms_commit_duration_seconds_bucket:rate5m)", "p99 commit"),
		q("histogram_quantile(0.5, voiceroom:rooms_commit_duration_seconds_bucket:rate5m)", "p50 commit"))
	b.series("Commands per group commit", "short", "Commands written per transaction, on average.",
		q("voiceroom:rooms_commit_batch_commands:avg_rate5m", "commands"))
	b.series("Commits in doubt", "short", "Group commits cut at their deadline or unanswered (alert VoiceroomCommitsInDoubt).",
		q("sum(increase(voiceroom_rooms_commits_in_doubt_total"+rate+"))", "in doubt"))
	b.row("HTTP")
	b.series("Requests by status", "reqps", "HTTP requests per second, health checks aside, by status.",
		q("sum by (status) (voiceroom:http_requests:rate5m)", "{{status}}"))
	b.series("5xx ratio", "percentunit", "Share of requests answered 5xx, health checks aside (alert VoiceroomHTTPErrorRatio above 1 %).",
		q("voiceroom:http_requests_5xx:ratio_rate5m", "5xx"))
	b.series("API latency", "s", "Latency of the client API (/api/...), every route (alert VoiceroomHTTPSlow: p99 above 0.5 s).",
		quantiles("voiceroom:http_request_duration_seconds_bucket:rate5m")...)
	return b.b
}

func eventBus() *dashboard.DashboardBuilder {
	b := newBoard("voiceroom-bus", "voiceroom: event bus",
		"The outbox and its relay, the durables' backlogs and the dead letters.")
	b.row("Outbox")
	b.series("Pending rows", "short", "Outbox rows not yet in the stream, all apps (alert VoiceroomOutboxBacklog).",
		q("max(voiceroom_outbox_pending_rows)", "pending"))
	b.series("Oldest pending row", "s", "Age of the oldest pending row (alert VoiceroomOutboxStuck above 10 s).",
		q("max(voiceroom_outbox_oldest_pending_age_seconds)", "age"))
	b.series("Publishes by path", "ops", "Events the stream acknowledged per second (fast path, relay) and failed publishes.",
		q("voiceroom:outbox_publish_success:rate5m", "{{path}}"),
		q("voiceroom:outbox_publish_failure:rate5m", "{{path}} failed"))
	b.series("Commit to stream ack", "s", "From the command's commit to the stream's ack, by path.",
		q("histogram_quantile(0.99, voiceroom:outbox_publish_latency_seconds_bucket:rate5m)", "p99 {{path}}"),
		q("histogram_quantile(0.5, voiceroom:outbox_publish_latency_seconds_bucket:rate5m)", "p50 {{path}}"))
	b.series("Fast path hand-overs", "ops", "Events the fast path left to the relay, by reason.",
		q("voiceroom:outbox_fastpath_handed_over:rate5m", "{{reason}}"))
	b.series("Relay drains", "short", "1 on the relay holding the drain lock: exactly one should (alert VoiceroomRelayNotDraining).",
		q("sum by (instance) (voiceroom_outbox_relay_draining)", "{{instance}}"))
	b.row("Durables")
	b.series("Backlog per durable", "short", "Events each durable has not been given yet (alert VoiceroomConsumerLagging).",
		q("max by (consumer) (voiceroom_bus_consumer_pending)", "{{consumer}}"))
	b.series("Ack pending per durable", "short", "Events handed out and not yet acknowledged: at the durable's MaxAckPending, its handlers are stuck.",
		q("max by (consumer) (voiceroom_bus_consumer_ack_pending)", "{{consumer}}"))
	b.series("Handled per durable", "ops", "Events acked per second, and naks (retries), by durable.",
		q("voiceroom:bus_messages_acked:rate5m", "{{consumer}}"),
		q("voiceroom:bus_messages_nakked:rate5m", "{{consumer}} nak"))
	b.row("Dead letters")
	b.series("Letters per sink", "short", "Dead letters kept per sink, all apps (alert VoiceroomDeadLettersGrowing).",
		q("max by (sink) (voiceroom_bus_dlq_depth)", "{{sink}}"))
	b.series("Dead-lettered", "ops", "Events the sinks gave up on, per second.",
		q("voiceroom:bus_messages_dead_lettered:rate5m", "{{consumer}}"),
		q("sum by (consumer) (rate(voiceroom_bus_gap_dead_lettered_total"+rate+"))", "{{consumer}} gap check"))
	b.series("Replayed and monitor failures", "ops", "Letters replayed to their sink; failed refreshes of these gauges (stale values).",
		q("sum by (sink) (rate(voiceroom_bus_dlq_replayed_total"+rate+"))", "{{sink}} replayed"),
		q("sum(rate(voiceroom_bus_monitor_refresh_failures_total"+rate+"))", "refresh failures"))
	return b.b
}

func roomsCluster() *dashboard.DashboardBuilder {
	b := newBoard("voiceroom-rooms-cluster", "voiceroom: rooms cluster",
		"The rooms nodes: partitions each serves, hand-overs, lease trouble, and the requests the api processes route to them.")
	b.row("Partitions")
	b.series("Partitions per node", "short", "Partitions each rooms node serves under a live lease, and P (alert VoiceroomPartitionsUnowned when their sum is below P).",
		q("sum by (instance) (voiceroom_cluster_leases_held)", "{{instance}}"),
		q("max(voiceroom_cluster_partitions)", "P"))
	b.stat("Served share", "percentunit", "Partitions served over P: below 100 %, some rooms answer UNAVAILABLE.",
		q("sum(voiceroom_cluster_leases_held) / max(voiceroom_cluster_partitions)", "served"), upSteps)
	b.stat("Live nodes", "short", "Rooms nodes in the member bucket.",
		q("max(voiceroom_cluster_live_nodes)", "nodes"), nil)
	b.series("Rooms loaded per node", "short", "Rooms whose cell is in memory, per node.",
		q("sum by (instance) (voiceroom_rooms_loaded)", "{{instance}}"))
	b.row("Hand-overs and leases")
	b.series("Hand-overs by reason", "ops", "Partitions nodes stopped serving: rebalance and shutdown are graceful; expired and fenced are not (alerts VoiceroomLeasesExpired, VoiceroomFencedWrites).",
		q("voiceroom:cluster_handovers:rate5m", "{{reason}}"))
	b.series("Lease renewal failures", "ops", "Renewals that failed (JetStream slow or unreachable), per node (alert VoiceroomLeaseRenewalsFailing).",
		q("sum by (instance) (rate(voiceroom_cluster_lease_renew_failures_total"+rate+"))", "{{instance}}"))
	b.series("Leases taken and fenced writes", "short", "Partition leases nodes created, and room writes the command log refused.",
		q("sum(increase(voiceroom_cluster_partitions_taken_total"+rate+"))", "taken"),
		q("sum(increase(voiceroom_cluster_fenced_writes_total"+rate+"))", "fenced writes"))
	b.row("Routing")
	b.series("Routed share", "percentunit", "Share of room requests an api process sent over NATS to another process (the rest it served in process).",
		q("voiceroom:cluster_routed_remote:ratio_rate5m", "remote"))
	b.series("Routed requests", "reqps", "Room commands and reads routed to their room's node, by path and outcome (no_owner: alert VoiceroomRoutedNoOwner).",
		q("voiceroom:cluster_routed_requests:rate5m", "{{path}} {{outcome}}"))
	b.series("Route latency", "s", "Latency of routed requests from the router's side, retries included, by path.",
		q("histogram_quantile(0.99, voiceroom:cluster_route_duration_seconds_bucket:rate5m)", "p99 {{path}}"),
		q("histogram_quantile(0.5, voiceroom:cluster_route_duration_seconds_bucket:rate5m)", "p50 {{path}}"))
	b.series("Route retries by reason", "ops", "Routed requests asked again: hand-overs in progress, owners gone or slow.",
		q("voiceroom:cluster_route_retries:rate5m", "{{reason}}"))
	b.series("Served for other processes", "reqps", "Routed requests the rooms nodes answered, by outcome.",
		q("sum by (outcome) (rate(voiceroom_cluster_served_requests_total"+rate+"))", "{{outcome}}"))
	return b.b
}

func sinks() *dashboard.DashboardBuilder {
	b := newBoard("voiceroom-sinks", "voiceroom: sinks",
		"What each sink does with the room events: Tencent IM, the room list, the ranks and the webhooks.")
	b.row("Tencent IM")
	b.series("IM events by outcome", "ops", "Room events per second: delivered, retried, dead_lettered, skipped, duplicate (alert VoiceroomIMDeliveryFailing).",
		q("voiceroom:imbridge_events:rate5m", "{{outcome}}"))
	b.series("Commit to IM", "s", "From the command's commit to Tencent IM accepting its message (alert VoiceroomIMLagging: p99 above 5 s).",
		quantiles("voiceroom:imbridge_commit_to_im_seconds_bucket:rate5m")...)
	b.series("IM REST calls", "reqps", "Tencent IM REST calls per second, by API and result code (0 = OK).",
		q("voiceroom:imbridge_calls:rate5m", "{{api}} {{code}}"))
	b.stat("IM configured", "none", "1 when some process delivers to Tencent IM (alert VoiceroomIMNotConfigured).",
		q("max(voiceroom_imbridge_configured)", "configured"), upSteps)
	b.row("Room list")
	b.series("Projector events by result", "ops", "Events the list projector handled, by result.",
		q("voiceroom:list_projector_events:rate5m", "{{result}}"))
	b.series("Projection lag", "s", "From an event's commit to its card in the read model (alert VoiceroomListProjectionLagging: p99 above 5 s).",
		quantiles("voiceroom:list_projection_lag_seconds_bucket:rate5m")...)
	b.series("List cache", "reqps", "Redis reads of the list query, by result (hit, near, miss, error).",
		q("voiceroom:list_cache_requests:rate5m", "{{result}}"))
	b.series("List Redis write failures", "ops", "Failed Redis writes of the list, by writer (alert VoiceroomListRedisWritesFailing).",
		q("voiceroom:list_redis_write_failures:rate5m", "{{writer}}"))
	b.row("Ranks")
	b.series("Ranks events by result", "ops", "Gift events the ranks consumer handled, by result.",
		q("voiceroom:ranks_events:rate5m", "{{result}}"))
	b.series("Rank reads by source", "reqps", "Rank reads answered from Redis or, without it, MySQL.",
		q("voiceroom:ranks_reads:rate5m", "{{source}}"))
	b.series("Ranks Redis failures", "ops", "Failed Redis calls of the ranks, by op (alert VoiceroomRanksRedisFailing on apply).",
		q("voiceroom:ranks_redis_failures:rate5m", "{{op}}"))
	b.row("Webhooks")
	b.series("Deliveries by outcome", "reqps", "Delivery attempts per second: delivered, failed (retried), rejected (alert VoiceroomWebhookDeliveriesFailing).",
		q("voiceroom:webhooks_deliveries:rate5m", "{{outcome}}"))
	b.series("Commit to delivery", "s", "From the command's commit to the endpoint's 2xx.",
		quantiles("voiceroom:webhooks_commit_to_delivery_seconds_bucket:rate5m")...)
	b.series("Endpoints by state", "short", "Endpoints live, reading their backlog, or paused (alert VoiceroomWebhookEndpointPaused).",
		q("max by (state) (voiceroom_webhooks_endpoints)", "{{state}}"))
	b.stat("Delivering processes", "short", "Processes holding the delivery lease: 1 (alert VoiceroomWebhooksNotDelivering at 0).",
		q("sum(voiceroom_webhooks_lease_held)", "holders"), upSteps)
	return b.b
}

// query is one PromQL query of a panel and its legend.
type query struct{ expr, legend string }

func q(expr, legend string) query { return query{expr, legend} }

// quantiles are the p50 and p99 of a recorded bucket rate.
func quantiles(buckets string) []query {
	return []query{
		q("histogram_quantile(0.99, "+buckets+")", "p99"),
		q("histogram_quantile(0.5, "+buckets+")", "p50"),
	}
}

// board lays panels out three to a row (stats six to a row) and numbers
// them, so that the JSON is the same at every run.
type board struct {
	b  *dashboard.DashboardBuilder
	id uint32
}

// datasource is the dashboards' Prometheus: their "datasource" variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

func newBoard(uid, title, description string) *board {
	return &board{b: dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"voiceroom"}).
		Editable().
		Timezone("browser").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-1h", "now").
		Refresh("30s").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus"))}
}

func (b *board) next() uint32 { b.id++; return b.id }

func (b *board) row(title string) {
	b.b.WithRow(dashboard.NewRowBuilder(title).Id(b.next()))
}

// series adds a time series panel of the queries.
func (b *board) series(title, unit, description string, queries ...query) {
	p := timeseries.NewPanelBuilder().
		Id(b.next()).
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Min(0).
		Span(8).
		Height(8).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom))
	for i, qu := range queries {
		p.WithTarget(target(i, qu))
	}
	b.b.WithPanel(p)
}

// stat adds a single-value panel, coloured by steps when given.
func (b *board) stat(title, unit, description string, qu query, steps []dashboard.Threshold) {
	p := stat.NewPanelBuilder().
		Id(b.next()).
		Title(title).
		Description(description).
		Datasource(datasource).
		Unit(unit).
		Span(4).
		Height(4).
		GraphMode(common.BigValueGraphModeNone).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(target(0, qu))
	if steps != nil {
		p.ColorMode(common.BigValueColorModeBackground).
			Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps))
	}
	b.b.WithPanel(p)
}

func target(i int, qu query) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		RefId(string(rune('A' + i))).
		Datasource(datasource).
		Expr(qu.expr).
		LegendFormat(qu.legend)
}

// upSteps colour a value red below 1: a 0/1 up, a count of holders that
// must be at least 1, a share below 100 %.
var upSteps = []dashboard.Threshold{{Color: "red"}, {Value: cog.ToPtr(1.0), Color: "green"}}
