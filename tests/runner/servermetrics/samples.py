# ruff: noqa: E501  (exposition lines are as long as servers print them)
"""Expositions written for these tests in the shape each server prints (not copied from one)."""

from __future__ import annotations

VLLM = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
vllm:num_requests_running{engine="1",model_name="m"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 1000.0
# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 500.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 100.0
# HELP vllm:request_success Count of successfully processed requests.
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 10.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 30.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 20.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 40.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 52.5
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 40.0
# HELP vllm:num_preemptions Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0
"""

SGLANG = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="0"} 12.0
sglang:num_running_reqs{model_name="m",tp_rank="0",dp_rank="1"} 4.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m",tp_rank="0",dp_rank="0"} 3.0
sglang:num_queue_reqs{model_name="m",tp_rank="0",dp_rank="1"} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m",tp_rank="0",dp_rank="0"} 0.5
sglang:token_usage{model_name="m",tp_rank="0",dp_rank="1"} 0.1
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m",tp_rank="0",dp_rank="0"} 0.8
sglang:cache_hit_rate{model_name="m",tp_rank="0",dp_rank="1"} 0.6
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="m",tp_rank="0",dp_rank="0"} 812.5
"""

DYNAMO_FRONTEND = """\
# HELP dynamo_frontend_inflight_requests Number of inflight requests
# TYPE dynamo_frontend_inflight_requests gauge
dynamo_frontend_inflight_requests{model="m"} 9
# HELP dynamo_frontend_queued_requests Number of requests in HTTP processing queue
# TYPE dynamo_frontend_queued_requests gauge
dynamo_frontend_queued_requests{model="m"} 4
# HELP dynamo_frontend_requests_total Total number of LLM requests processed
# TYPE dynamo_frontend_requests_total counter
dynamo_frontend_requests_total{endpoint="chat_completions",model="m",request_type="stream",status="success"} 120
dynamo_frontend_requests_total{endpoint="chat_completions",model="m",request_type="stream",status="error"} 2
# HELP dynamo_frontend_worker_waiting_requests Requests waiting inside each backend worker rank
# TYPE dynamo_frontend_worker_waiting_requests gauge
dynamo_frontend_worker_waiting_requests{dp_rank="0",worker_id="7587890000000001",worker_type="decode"} 1
dynamo_frontend_worker_waiting_requests{dp_rank="0",worker_id="7587890000000002",worker_type="decode"} 3
# HELP dynamo_frontend_worker_active_decode_blocks Active KV cache decode blocks per worker
# TYPE dynamo_frontend_worker_active_decode_blocks gauge
dynamo_frontend_worker_active_decode_blocks{dp_rank="0",worker_id="7587890000000001",worker_type="decode"} 42
# HELP dynamo_frontend_time_to_first_token_seconds Time to first token
# TYPE dynamo_frontend_time_to_first_token_seconds histogram
dynamo_frontend_time_to_first_token_seconds_bucket{model="m",le="0.1"} 50
dynamo_frontend_time_to_first_token_seconds_bucket{model="m",le="+Inf"} 122
dynamo_frontend_time_to_first_token_seconds_sum{model="m"} 30.5
dynamo_frontend_time_to_first_token_seconds_count{model="m"} 122
"""

DYNAMO_WORKER = """\
# HELP dynamo_component_kvstats_gpu_cache_usage_percent GPU cache usage as a percentage (0.0-1.0)
# TYPE dynamo_component_kvstats_gpu_cache_usage_percent gauge
dynamo_component_kvstats_gpu_cache_usage_percent{dp_rank="0",dynamo_component="backend",dynamo_namespace="dynamo"} 0.3
dynamo_component_kvstats_gpu_cache_usage_percent{dp_rank="1",dynamo_component="backend",dynamo_namespace="dynamo"} 0.5
# HELP dynamo_component_kvstats_gpu_prefix_cache_hit_rate GPU prefix cache hit rate (0.0-1.0)
# TYPE dynamo_component_kvstats_gpu_prefix_cache_hit_rate gauge
dynamo_component_kvstats_gpu_prefix_cache_hit_rate{dp_rank="0",dynamo_component="backend",dynamo_namespace="dynamo"} 0.9
dynamo_component_kvstats_gpu_prefix_cache_hit_rate{dp_rank="1",dynamo_component="backend",dynamo_namespace="dynamo"} 0.7
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 6.0
"""

# The frontend page as Dynamo 1.6.1 prints it (no per-worker queue gauge yet): KV use comes
# from the router's active blocks per worker over the model's KV blocks per worker.
DYNAMO_161_FRONTEND = """\
# HELP dynamo_frontend_inflight_requests Number of inflight requests
# TYPE dynamo_frontend_inflight_requests gauge
dynamo_frontend_inflight_requests{model="tiny"} 14
# HELP dynamo_frontend_queued_requests Number of requests in HTTP processing queue
# TYPE dynamo_frontend_queued_requests gauge
dynamo_frontend_queued_requests{model="tiny"} 6
# HELP dynamo_frontend_model_total_kv_blocks Total KV blocks available for a worker serving the model
# TYPE dynamo_frontend_model_total_kv_blocks gauge
dynamo_frontend_model_total_kv_blocks{model="tiny"} 1000
# HELP dynamo_frontend_worker_active_decode_blocks Active KV cache decode blocks per worker
# TYPE dynamo_frontend_worker_active_decode_blocks gauge
dynamo_frontend_worker_active_decode_blocks{dp_rank="0",worker_id="12339007555188169720",worker_type="decode"} 250
dynamo_frontend_worker_active_decode_blocks{dp_rank="0",worker_id="15836734920903695127",worker_type="decode"} 50
# HELP dynamo_frontend_cached_tokens Number of cached tokens (prefix cache hits) per request
# TYPE dynamo_frontend_cached_tokens histogram
dynamo_frontend_cached_tokens_bucket{model="tiny",le="+Inf"} 7
dynamo_frontend_cached_tokens_sum{model="tiny"} 7360
dynamo_frontend_cached_tokens_count{model="tiny"} 7
# HELP dynamo_frontend_input_sequence_tokens Input sequence length in tokens
# TYPE dynamo_frontend_input_sequence_tokens histogram
dynamo_frontend_input_sequence_tokens_bucket{model="tiny",le="+Inf"} 7
dynamo_frontend_input_sequence_tokens_sum{model="tiny"} 9200
dynamo_frontend_input_sequence_tokens_count{model="tiny"} 7
# HELP dynamo_frontend_requests_total Total number of LLM requests processed
# TYPE dynamo_frontend_requests_total counter
dynamo_frontend_requests_total{endpoint="chat_completions",error_type="",model="tiny",request_type="unary",status="success"} 7
"""

# A Dynamo mocker worker's own page (its system port) under load: the worker's handler gauges
# beside the engine's `vllm:` series it relays.
DYNAMO_MOCKER_WORKER = """\
# TYPE dynamo_component_inflight_requests gauge
dynamo_component_inflight_requests{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="6e00293acfc638b"} 4
# TYPE dynamo_component_requests_total counter
dynamo_component_requests_total{dynamo_component="backend",dynamo_endpoint="generate",dynamo_namespace="dynamo",worker_id="6e00293acfc638b"} 40
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.01385498046875
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 4
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 1
"""
