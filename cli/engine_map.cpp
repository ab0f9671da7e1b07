// vLLM and SGLang flags onto gpuplan's serving scenario keys (engine_args.hpp): what each flag means in its engine,
// what gpuplan already assumes, what does not change the estimate, and what is refused until it is modelled. The
// overlay of --vllm-args / --sglang-args and typed spellings on the scenario is engine_overlay.cpp.
#include "engine_args.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <string>

#include <fmt/format.h>

namespace gpuplan::cli {

namespace {

using engine_detail::kNotModelled;

/// Flags that change nothing gpuplan estimates: the HTTP front end, logging, tokenizer and chat templates, where the
/// weights are downloaded from, tool and reasoning parsers, the sampling seed, multi-node addresses.
const std::set<std::string, std::less<>>& ignored_flags(ServingEngine e) {
  static const std::set<std::string, std::less<>> vllm{
      "--host", "--port", "--uds", "--uvicorn-log-level", "--disable-uvicorn-access-log", "--allow-credentials",
      "--allowed-origins", "--allowed-methods", "--allowed-headers", "--api-key", "--chat-template",
      "--chat-template-content-format", "--trust-request-chat-template", "--response-role", "--ssl-keyfile",
      "--ssl-certfile", "--ssl-ca-certs", "--enable-ssl-refresh", "--ssl-cert-reqs", "--root-path", "--middleware",
      "--return-tokens-as-token-ids", "--disable-frontend-multiprocessing", "--enable-request-id-headers",
      "--enable-auto-tool-choice", "--exclude-tools-when-tool-choice-none", "--tool-call-parser",
      "--tool-parser-plugin", "--tool-server", "--log-config-file", "--max-log-len", "--disable-fastapi-docs",
      "--enable-prompt-tokens-details", "--enable-server-load-tracking", "--enable-force-include-usage",
      "--enable-tokenizer-info-endpoint", "--enable-log-outputs", "--h11-max-incomplete-event-size",
      "--h11-max-header-count", "--log-error-stack", "--headless", "--served-model-name", "--tokenizer",
      "--tokenizer-mode", "--trust-remote-code", "--seed", "--hf-config-path", "--allowed-local-media-path",
      "--allowed-media-domains", "--revision", "--code-revision", "--tokenizer-revision", "--max-logprobs",
      "--logprobs-mode", "--skip-tokenizer-init", "--config-format", "--hf-token", "--generation-config",
      "--override-generation-config", "--load-format", "--download-dir", "--safetensors-load-strategy",
      "--model-loader-extra-config", "--ignore-patterns", "--use-tqdm-on-load", "--pt-load-map-location",
      "--reasoning-parser", "--guided-decoding-backend", "--guided-decoding-disable-fallback",
      "--guided-decoding-disable-any-whitespace", "--guided-decoding-disable-additional-properties",
      "--structured-outputs-config", "--distributed-executor-backend", "--data-parallel-address",
      "--data-parallel-rpc-port", "--data-parallel-backend", "--max-parallel-loading-workers",
      "--ray-workers-use-nsight", "--worker-cls", "--worker-extension-cls", "--prefix-caching-hash-algo",
      "--show-hidden-metrics-for-version", "--otlp-traces-endpoint", "--collect-detailed-traces",
      "--disable-log-stats", "--aggregate-engine-logging", "--enable-log-requests", "--disable-log-requests",
      "--swap-space", "--enable-sleep-mode", "--kv-events-config", "--tokens-only"};
  static const std::set<std::string, std::less<>> sglang{
      "--host", "--port", "--skip-server-warmup", "--warmups", "--nccl-port", "--tokenizer-path", "--tokenizer-mode",
      "--tokenizer-worker-num", "--skip-tokenizer-init", "--load-format", "--model-loader-extra-config",
      "--trust-remote-code", "--revision", "--random-seed", "--stream-interval", "--stream-output",
      "--constrained-json-whitespace-pattern", "--constrained-json-disable-any-whitespace", "--watchdog-timeout",
      "--dist-timeout", "--download-dir", "--base-gpu-id", "--gpu-id-step", "--sleep-on-idle", "--log-level",
      "--log-level-http", "--log-requests", "--log-requests-level", "--crash-dump-folder", "--crash-on-nan",
      "--show-time-cost", "--enable-metrics", "--enable-metrics-for-all-schedulers",
      "--tokenizer-metrics-custom-labels-header", "--tokenizer-metrics-allowed-custom-labels",
      "--bucket-time-to-first-token", "--bucket-inter-token-latency", "--bucket-e2e-request-latency",
      "--collect-tokens-histogram", "--prompt-tokens-buckets", "--generation-tokens-buckets",
      "--gc-warning-threshold-secs", "--decode-log-interval", "--enable-request-time-stats-logging",
      "--kv-events-config", "--enable-trace", "--oltp-traces-endpoint", "--api-key", "--served-model-name",
      "--weight-version", "--chat-template", "--completion-template", "--file-storage-path", "--enable-cache-report",
      "--reasoning-parser", "--tool-call-parser", "--sampling-defaults", "--tool-server", "--dist-init-addr",
      "--nnodes", "--node-rank", "--preferred-sampling-params", "--grammar-backend", "--enable-p2p-check",
      "--enable-nan-detection", "--delete-ckpt-after-loading", "--allow-auto-truncate",
      "--enable-custom-logit-processor", "--enable-layerwise-nvtx-marker", "--disable-outlines-disk-cache"};
  return e == ServingEngine::vllm ? vllm : sglang;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// vLLM's human_readable_int (arg_utils.py): "32k" = 32 000, "32K" = 32 768, "1.5m" = 1 500 000, else a plain int.
std::optional<long long> human_int(const std::string& s, bool allow_suffix) {
  if (s.empty()) return std::nullopt;
  const char last = s.back();
  const std::string num = std::string("kKmMgGtT").find(last) != std::string::npos && allow_suffix
                              ? s.substr(0, s.size() - 1)
                              : s;
  if (num.size() == s.size()) {
    long long v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
    return v;
  }
  if (num.empty() || num.find_first_not_of("0123456789.") != std::string::npos) return std::nullopt;
  const bool binary = last == 'K' || last == 'M' || last == 'G' || last == 'T';
  if (binary && num.find('.') != std::string::npos) return std::nullopt;  // vLLM refuses decimals with K/M/G
  double v = 0;
  try {
    v = std::stod(num);
  } catch (...) {
    return std::nullopt;
  }
  const double mult = last == 'k' ? 1e3 : last == 'm' ? 1e6 : last == 'g' ? 1e9 : last == 't' ? 1e12
                      : last == 'K' ? 1024.0 : last == 'M' ? 1048576.0 : last == 'G' ? 1073741824.0
                                                                          : 1099511627776.0;
  return static_cast<long long>(v * mult);
}

std::optional<double> real(const std::string& s) {
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<EngineMapping> map_engine(const EngineArgs& args, Diagnostics& diags) {
  EngineMapping m;
  m.engine = args.engine;
  const bool vllm = args.engine == ServingEngine::vllm;
  const char* label = engine_label(args.engine);
  const std::string src = args.source;
  auto err = [&](const EngineFlag& f, std::string msg) {
    diags.add(Diagnostic{Severity::error, src, f.given, f.line, 0, fmt::format("'{}': {}", f.text(), msg)});
  };
  // A flag that changes performance in a way gpuplan does not price: refused by name (exit 2), never ignored.
  auto refuse = [&](const EngineFlag& f, const std::string& why) {
    if (why.empty())
      err(f, fmt::format("a {} setting that changes performance in a way gpuplan does not price: {}; leave it out to "
                         "estimate without it",
                         label, kNotModelled));
    else
      err(f, fmt::format("{}is {}", why, kNotModelled));
  };
  // argparse: a repeated flag, the last counts.
  std::map<std::string, const EngineFlag*> last;
  for (const auto& f : args.flags) last[f.name] = &f;
  auto set = [&](const char* key, nlohmann::json v, const EngineFlag& f) {
    m.keys[key] = std::move(v);
    m.origin[key] = f.text();
  };
  auto integer = [&](const EngineFlag& f, long long lo, bool suffix) -> std::optional<long long> {
    const auto v = human_int(f.values.front().text, suffix);
    if (!v || *v < lo) {
      err(f, fmt::format("expected an integer ≥ {}", lo));
      return std::nullopt;
    }
    return v;
  };
  auto value = [](const EngineFlag& f) { return f.values.empty() ? std::string() : f.values.front().text; };

  std::optional<std::string> dtype, kv, quant;
  const EngineFlag *dtype_f = nullptr, *kv_f = nullptr, *quant_f = nullptr;
  std::optional<long long> dp;
  const EngineFlag* dp_f = nullptr;
  bool dp_attention = false;
  const EngineFlag* dp_attention_f = nullptr;
  const EngineFlag* deepep_f = nullptr;
  const bool before = diags.has_errors();

  for (const auto& [name, fp] : last) {
    const EngineFlag& f = *fp;
    const std::string v = value(f);
    if (ignored_flags(args.engine).count(name)) {
      m.ignored.push_back(f.text());
      continue;
    }
    // ---- the model
    if (name == "--model" || name == "--model-path") {
      set("model", v, f);
      m.model_from = f.text();
    }
    // ---- layout
    else if (name == "--tensor-parallel-size") {
      if (auto n = integer(f, 1, false)) set("tp", *n, f);
    } else if (name == "--pipeline-parallel-size") {
      if (auto n = integer(f, 1, false)) set("pp", *n, f);
    } else if (name == "--data-parallel-size") {
      dp = integer(f, 1, false);
      dp_f = &f;
    } else if (name == "--enable-expert-parallel") {
      if (!f.negated) m.expert_parallel_flag = f.text();
      else m.assumed.push_back(f.text());  // --no-enable-expert-parallel: vLLM's default
    } else if (name == "--expert-parallel-size") {  // SGLang: EP inside the TP group, as gpuplan's --ep
      if (auto n = integer(f, 1, false)) set("ep", *n, f);
    } else if (name == "--enable-dp-attention") {
      dp_attention = true;
      dp_attention_f = &f;
    } else if (name == "--moe-a2a-backend" || name == "--enable-deepep-moe") {
      // SGLang's MoE all-to-all backend: DeepEP spreads the experts over every GPU (EP = TP size, as wide EP) and
      // moves the tokens with its own kernels (gpuplan's moe_a2a_backend deepep: ops/moe_a2a.hpp).
      if (name == "--enable-deepep-moe" || v == "deepep") {
        deepep_f = &f;
        set("moe_a2a_backend", "deepep", f);
      } else if (v == "none") {
        m.assumed.push_back(f.text());  // all-reduce/all-gather dispatch inside TP: gpuplan's default NCCL pricing
      } else {
        refuse(f, fmt::format("the MoE all-to-all backend '{}' ", v));
      }
    } else if (name == "--deepep-mode") {
      if (v == "auto" || v == "normal" || v == "low_latency") set("deepep_mode", v, f);
      else err(f, "expected one of auto, normal, low_latency");
    } else if (name == "--enable-two-batch-overlap") {
      if (!f.negated) set("two_batch_overlap", true, f);
    } else if (name == "--moe-dense-tp-size") {
      // The dense FFN layers at TP 1 on each DP rank (LMSYS 2025-05-05): gpuplan runs them at the attention TP.
      if (auto n = integer(f, 1, false); n && *n != 1) refuse(f, "dense FFN layers at a TP other than 1 or the attention TP ");
      else m.assumed.push_back(f.text());
    } else if (name == "--decode-context-parallel-size") {
      if (auto n = integer(f, 1, false); n && *n > 1) refuse(f, "decode context parallelism (KV split over the TP ranks) ");
    }
    // ---- formats
    else if (name == "--dtype") {
      dtype = v;
      dtype_f = &f;
    } else if (name == "--kv-cache-dtype") {
      kv = v;
      kv_f = &f;
    } else if (name == "--quantization") {
      quant = v;
      quant_f = &f;
    }
    // ---- memory and scheduler
    else if (name == "--gpu-memory-utilization") {
      const auto x = real(v);
      if (!x) err(f, "expected a fraction, e.g. 0.9");
      else set("gpu_memory_utilization", *x, f);
    } else if (name == "--mem-fraction-static") {
      const auto x = real(v);
      if (!x) err(f, "expected a fraction, e.g. 0.88");
      else set("mem_fraction_static", *x, f);
    } else if (name == "--max-num-seqs" || name == "--max-running-requests") {
      if (auto n = integer(f, 1, false)) set("max_num_seqs", *n, f);
    } else if (name == "--max-num-batched-tokens") {
      if (auto n = integer(f, 1, true)) set("max_num_batched_tokens", *n, f);
    } else if (name == "--chunked-prefill-size") {
      const auto n = human_int(v, false);
      if (n && *n == -1) refuse(f, "prefill without chunking (SGLang's -1) ");
      else if (!n || *n < 1) err(f, "expected a positive number of tokens (or -1)");
      else set("max_num_batched_tokens", *n, f);
    } else if (name == "--max-model-len" || name == "--context-length") {
      if (auto n = integer(f, 1, vllm)) {
        m.max_len = n;
        m.max_len_flag = f.text();
      }
    } else if (name == "--block-size" || name == "--page-size") {
      if (auto n = integer(f, 1, false)) set("block_size", *n, f);
    } else if (name == "--enforce-eager" || name == "--disable-cuda-graph") {
      if (!f.negated) set("enforce_eager", true, f);
      else m.assumed.push_back(f.text());
    } else if (name == "--enable-chunked-prefill") {
      if (f.negated) refuse(f, "prefill without chunking ");
      else m.assumed.push_back(f.text());
    } else if (name == "--enable-prefix-caching") {
      if (f.negated) m.prefix_cache_off_flag = f.text();
      else m.assumed.push_back(f.text());
    } else if (name == "--disable-radix-cache") {
      m.prefix_cache_off_flag = f.text();
    } else if (name == "--speculative-config") {
      nlohmann::json spec;
      try {
        spec = nlohmann::json::parse(v);
      } catch (const std::exception&) {
        err(f, "expected a JSON object, e.g. '{\"model\": \"...\", \"num_speculative_tokens\": 5}'");
        continue;
      }
      if (!spec.is_object()) {
        err(f, "expected a JSON object");
        continue;
      }
      m.spec_flag = f.text();
      const std::string method = spec.value("method", std::string());
      if (spec.contains("num_speculative_tokens") && spec["num_speculative_tokens"].is_number_integer())
        set("spec_tokens", spec["num_speculative_tokens"].get<long long>(), f);
      else
        err(f, "gpuplan needs \"num_speculative_tokens\" (the draft tokens per step, γ)");
      if (spec.contains("model") && spec["model"].is_string() && (method.empty() || method == "draft_model"))
        set("draft_model", spec["model"].get<std::string>(), f);
      else
        m.spec_needs_draft_ms = true;
      for (auto it = spec.begin(); it != spec.end(); ++it)
        if (it.key() != "method" && it.key() != "model" && it.key() != "num_speculative_tokens")
          m.notes.push_back(fmt::format("--speculative-config \"{}\" does not change what gpuplan models", it.key()));
    }
    else if (name == "--config") {
      err(f, fmt::format("gpuplan does not read {}'s YAML config file: give its options as flags on the command line",
                         label));
    }
    // ---- everything else changes performance in a way gpuplan does not price
    else {
      refuse(f, "");
    }
  }
  // `vllm serve MODEL`: the positional model tag wins over --model (vllm/entrypoints/cli/serve.py sets args.model
  // from model_tag).
  if (args.model_tag) {
    m.keys["model"] = args.model_tag->text;
    m.origin["model"] = fmt::format("vllm serve {}", args.model_tag->text);
    m.model_from = m.origin["model"];
  }

  // ---- data parallelism: replicas, or DP attention with wide EP (gpuplan's --attention-dp, wide_ep.hpp)
  if (dp_attention && dp && *dp > 1) {
    // SGLang: --tp M GPUs in all, --dp N attention ranks of M/N GPUs each; --ep M (or the DeepEP backend, which sets
    // it) spreads the experts over all M.
    const long long M = m.keys.contains("tp") ? m.keys["tp"].get<long long>() : 1;
    const long long ep = m.keys.contains("ep") ? m.keys["ep"].get<long long>() : (deepep_f != nullptr ? M : 1);
    if (M % *dp != 0) {
      err(*dp_f, fmt::format("data-parallel attention splits the --tp {} GPUs into {} ranks: {} must divide {}", M, *dp,
                             *dp, M));
    } else if (ep != M) {
      refuse(*dp_attention_f,
             fmt::format("data-parallel attention with the experts over EP {} of the {} GPUs (the rest "
                         "tensor-parallel: give --ep-size {} or --moe-a2a-backend deepep for wide EP) ",
                         ep, M, M));
    } else {
      m.keys["tp"] = M / *dp;
      set("attention_dp", *dp, *dp_f);
      m.keys.erase("ep");
      m.origin.erase("ep");
      m.notes.push_back(fmt::format("{} with {} and --tp {}: {} attention ranks of TP {}, experts over all {} GPUs "
                                    "(gpuplan --attention-dp {} --tp {}: wide EP {})",
                                    dp_attention_f->text(), dp_f->text(), M, *dp, M / *dp, M, *dp, M / *dp, M));
    }
  } else if (dp_attention) {
    m.assumed.push_back(dp_attention_f->text());  // one DP rank: plain TP attention
  } else if (dp && *dp > 1 && !m.expert_parallel_flag.empty()) {
    // vLLM: --data-parallel-size N with --enable-expert-parallel: N attention ranks of TP t, EP = N·t.
    set("attention_dp", *dp, *dp_f);
  } else if (dp && *dp > 1)
    err(*dp_f, fmt::format("{} data-parallel replicas behind one API server: gpuplan serve prices one replica (TP × PP "
                           "GPUs), and with --rate the planner chooses the number of replicas; drop the flag (a fixed "
                           "replica count is {})",
                           *dp, kNotModelled));
  else if (dp)
    m.assumed.push_back(dp_f->text());

  // ---- weights and KV: --dtype, --quantization, --kv-cache-dtype
  std::optional<std::string> model_dtype;  // what --dtype makes the weights (and an "auto" KV cache)
  if (dtype) {
    const std::string d = lower(*dtype);
    if (d == "half" || d == "float16") model_dtype = "fp16";
    else if (d == "bfloat16") model_dtype = "bf16";
    else if (d == "float" || d == "float32") model_dtype = "fp32";
    else if (d == "auto") m.notes.push_back(fmt::format("'{}': the checkpoint's dtype; gpuplan takes bf16",
                                                        dtype_f->text()));
    else err(*dtype_f, "expected auto, half, float16, bfloat16, float or float32");
    if (model_dtype) set("weight_dtype", *model_dtype, *dtype_f);
  }
  if (quant) {
    const std::string q = lower(*quant);
    std::string w;
    if (q == "fp8" || q == "w8a8_fp8" || q == "modelopt_fp8") {
      w = "fp8";
    } else if (q == "modelopt_fp4" || q == "nvfp4") {
      w = "fp4";
    } else if (q == "awq" || q == "awq_marlin" || q == "gptq" || q == "gptq_marlin") {
      w = "int4";
      m.notes.push_back(fmt::format("'{}': 4-bit weights with bf16 activations, one scale per 128 weights unless "
                                    "--weight-group-size says otherwise; an 8-bit {} checkpoint needs "
                                    "--weight-dtype int8",
                                    quant_f->text(), q.substr(0, 4) == "gptq" ? "GPTQ" : "AWQ"));
    } else {
      refuse(*quant_f, fmt::format("the '{}' quantisation method ", *quant));
    }
    if (!w.empty()) set("weight_dtype", w, *quant_f);
  }
  if (kv) {
    const std::string k = lower(*kv);
    if (k == "fp8" || k == "fp8_e4m3" || k == "fp8_e5m2") set("kv_dtype", "fp8", *kv_f);
    else if (k == "bfloat16" || k == "bf16") set("kv_dtype", "bf16", *kv_f);
    else if (k == "auto") {
      if (model_dtype) set("kv_dtype", *model_dtype, *kv_f);
    } else if (k == "fp8_inc" || k == "fp8_ds_mla" || k == "fp4_e2m1") {
      refuse(*kv_f, fmt::format("a '{}' KV cache ", *kv));
    } else {
      err(*kv_f, vllm ? "expected auto, bfloat16, fp8, fp8_e4m3 or fp8_e5m2" : "expected auto, fp8_e5m2 or fp8_e4m3");
    }
  } else if (model_dtype) {
    set("kv_dtype", *model_dtype, *dtype_f);  // kv_cache_dtype "auto" (the default) follows the model's dtype
  }

  // ---- a whole command line: the engine's defaults for what it leaves out
  if (args.whole_command) {
    auto dflt = [&](const char* key, nlohmann::json v, const std::string& why) {
      if (m.keys.contains(key)) return;
      m.keys[key] = std::move(v);
      m.origin[key] = fmt::format("{} default", label);
      m.defaulted[key] = why;
    };
    dflt("engine", vllm ? "vllm" : "sglang", fmt::format("a {} command line has {}'s memory semantics", label, label));
    dflt("tp", 1, vllm ? "vLLM's default without --tensor-parallel-size" : "SGLang's default without --tp-size");
    dflt("pp", 1, vllm ? "vLLM's default without --pipeline-parallel-size" : "SGLang's default without --pp-size");
  }
  if (diags.has_errors() && !before) return std::nullopt;
  return m;
}

}  // namespace gpuplan::cli
