#include "compiler/LoadModel.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>

#include "mlir/Parser/Parser.h"
#include "passes/PassUtils.h"
#include "runtime/io/format_bytes.h"

using namespace mlir;

namespace mt {

UpdateKind chooseUpdate(const CompileOptions& o, ParamCount params, std::string& note) {
  if (o.update) return *o.update;
  const double per_param = 16.0;  // bf16 streaming included: the master is then split, not copied
  const double deferred_bytes = per_param * (params.all - params.frozen) + 4.0 * params.frozen;
  if (o.host_mem <= 0 || deferred_bytes <= o.host_mem) return UpdateKind::kDeferred;
  note = fmt::format("chosen for --host-mem: the deferred update's {:.0f} bytes/trained param would need {}",
                     per_param, formatBytes(deferred_bytes));
  return UpdateKind::kOnArrival;
}

namespace {

// Each load phase prints its error and returns false, or fills `m`.
bool importOnnx(MLIRContext& context, const CompileOptions& o, LoadedModel& m) {
  onnximport::ImportOptions options;
  options.training = !o.forward_only;
  options.frozen_pattern = o.frozen;
  options.trainable_pattern = o.trainable;
  options.batch = o.batch;
  options.seq = o.seq;
  try {
    m.module = onnximport::importModel(context, o.model, options, &m.imported);
  } catch (const onnximport::ImportError& e) {
    std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), e.what());
    return false;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "mtc: error: %s: out of memory while importing\n", o.model.c_str());
    return false;
  }
  m.description = fmt::format("{} (ONNX, {} parameter tensors from its initializers)", o.model, m.imported.params.size());
  return true;
}

// A router's choice and weights in the summary beyond the plain softmax's (", sigmoid scores
// chosen with a frozen bias within 1 of 2 groups, renormalised, x 2.5"; DeepSeek-V2's ", within 3 of
// 8 groups by their best, x 16").
std::string routerChoice(const ModelConfig& c) {
  std::string choice = c.sigmoid_router       ? ", sigmoid scores chosen with a frozen bias"
                       : c.router_choice_bias ? ", chosen with a frozen bias"
                                              : "";
  if (c.router_groups > 1)
    choice += fmt::format("{} within {} of {} groups{}", c.sigmoid_router ? "" : ",", c.router_groups_chosen,
                          c.router_groups, c.sigmoid_router ? "" : " by their best");
  if (c.normalize_topk) choice += ", renormalised";
  if (c.routed_scaling != 1.0) choice += fmt::format(", x {:g}", c.routed_scaling);
  return choice;
}

// The model's shape in the summary: "llama, 2 layers, width 64, ...".
std::string describeShape(const std::string& origin, const ModelConfig& c) {
  std::string experts;
  const bool oss = c.expert_form == ModelConfig::ExpertForm::kGptOss;
  if (c.experts) {
    const std::string routing = oss ? fmt::format(", softmax of the top k; gpt-oss's biased experts, "
                                                  "SwiGLU clamped at {:g}", c.swiglu_limit)
                                    : routerChoice(c);
    experts = fmt::format(", {} experts of width {} (top {}{}){} in {} of {} layers{}", c.experts, c.expert_ffn,
                          c.experts_per_token, routing,
                          c.shared_expert_ffn ? fmt::format(" beside a shared expert of width {} ({})",
                                                            c.shared_expert_ffn,
                                                            c.shared_expert_gated ? "sigmoid-gated" : "ungated")
                                              : "",
                          c.moeLayers(), c.layers,
                          c.router_aux_loss_coef > 0 ? fmt::format(", load-balancing loss x {:g} trained on",
                                                                   c.router_aux_loss_coef)
                                                     : "");
  }
  // The factor in effect (YaRN's from the two contexts where the config names the original).
  const std::string rope = c.rope_scaling.kind == RopeScaling::Kind::kNone
                               ? ""
                               : fmt::format(", rope scaled ({} x {:g})", ropeScalingName(c.rope_scaling.kind),
                                             ropeScalingAttrs(c, c.context, false).values[0]);
  const std::string partial =
      c.rotaryDim() == c.headDim() ? "" : fmt::format(", rotary over {} of each head's {}", c.rotaryDim(), c.headDim());
  int64_t sliding = 0;
  for (int64_t l = 0; l < c.layers; ++l) sliding += c.attentionWindow(l) > 0;
  const std::string window =
      sliding ? fmt::format(", {}-token windows in {} of {} layers", c.sliding_window, sliding, c.layers) : "";
  // Gemma 2's and 3's, Granite's, SmolLM3's and OLMo 2's differences from the llama family's, where
  // the config has them.
  std::string forms;
  if (!c.nope_layers.empty())
    forms += fmt::format(", no rotary embedding in {} of {} layers (NoPE)", c.nope_layers.size(), c.layers);
  if (c.norm_plus_one) forms += ", norms of 1 + weight";
  if (c.sandwich_norms)  // (Gemma's "norms of 1 + weight" said just before)
    forms += !c.input_norms    ? ", norms after each sublayer (none before)"
             : c.norm_plus_one ? " around both sublayers"
                               : ", norms around both sublayers";
  if (c.qk_norm_whole) forms += ", the q/k norms over the whole projections";
  if (c.rope_pairs_interleaved) forms += ", rotary pairs interleaved (2i and 2i + 1)";
  if (c.embed_scaled) forms += fmt::format(", embedding x sqrt({})", c.width);
  if (c.gate_activation == ModelConfig::GateActivation::kGeluTanh) forms += ", GeGLU (GELU's tanh form)";
  if (c.query_pre_attn_scalar > 0) forms += fmt::format(", scores / sqrt({:g})", c.query_pre_attn_scalar);
  if (c.rope_local_theta > 0 && sliding) forms += fmt::format(", rope base {:g} (unscaled) in the sliding layers", c.rope_local_theta);
  if (c.embedding_multiplier != 1.0) forms += fmt::format(", embedding x {:g}", c.embedding_multiplier);
  if (c.residual_multiplier != 1.0) forms += fmt::format(", sublayer outputs x {:g}", c.residual_multiplier);
  if (c.attention_multiplier > 0) forms += fmt::format(", scores x {:g}", c.attention_multiplier);
  if (c.logits_scaling != 1.0 && !c.hasScoreHead()) forms += fmt::format(", logits / {:g}", c.logits_scaling);
  if (c.attn_softcap > 0) forms += fmt::format(", scores softcapped at {:g}", c.attn_softcap);
  if (c.final_softcap > 0 && !c.hasScoreHead()) forms += fmt::format(", logits softcapped at {:g}", c.final_softcap);
  if (c.latentAttention())
    forms += fmt::format(", latent attention (keys and values from rank {}{}; values {} wide, padded to the heads'{})",
                         c.kv_lora_rank, c.q_lora_rank ? fmt::format(", q from rank {}", c.q_lora_rank) : "",
                         c.v_head_dim, c.rope_interleave ? "; rotated pairs interleaved" : "");
  return fmt::format("{}, {} layers, width {}, {} heads / {} kv{}, ffn {}, vocab {}{}{}{}{}{}{}{}{}{}", origin, c.layers,
                     c.width, c.heads, c.kv_heads, c.head_dim ? fmt::format(" of width {}", c.head_dim) : "", c.ffn,
                     c.vocab, c.score_head == ModelConfig::ScoreHead::kNew          ? ", a new score head (seeded)"
                     : c.score_head == ModelConfig::ScoreHead::kPretrained ? ", its score head"
                     : c.tied                                              ? ", tied" : "",
                     c.o_bias ? ", q/k/v/o biases" : c.qkv_bias ? ", q/k/v biases" : "", c.qk_norm ? ", q/k norms" : "", c.attention_sinks ? ", attention sinks" : "", window, rope, partial, experts, forms);
}

// What --objective dpo, kto or reward cannot be combined with ("" if nothing).
std::string preferenceProblem(const CompileOptions& o) {
  const bool kto = o.loss.objective == LossObjective::kKto;
  const char* flag = kto ? "--objective kto" : o.loss.objective == LossObjective::kReward ? "--objective reward"
                                                                                        : "--objective dpo";
  const char* pairs = kto ? "(example, KL row)" : "(chosen, rejected)";
  if (o.packed_examples)
    return fmt::format("{} trains on {} rows, one reply each: drop --packed-examples", flag, pairs);
  if (o.batch % 2 != 0)
    return fmt::format("{} needs an even --batch (its rows are {} pairs), not {}", flag, pairs, o.batch);
  return "";
}

// mtc --frozen / --trainable / --lora on the loaded model: prints the problem and returns false,
// or marks (and adds the adapters).
bool markTrainable(const CompileOptions& o, LoadedModel& m) {
  // gpt-oss's stacks go to PEFT as target_parameters, which have no dropout (PEFT refuses it).
  if (o.lora_experts && o.lora_dropout > 0 && m.config.experts > 0 &&
      m.config.expert_form == ModelConfig::ExpertForm::kGptOss) {
    std::fprintf(stderr, "mtc: error: %s: --lora-dropout with --lora-experts on gpt-oss's stacks of experts: PEFT's "
                 "form of their adapters (target_parameters) has no dropout; drop --lora-dropout\n", o.model.c_str());
    return false;
  }
  const std::string problem = selectTrainable(*m.module, o);
  if (!problem.empty()) std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), problem.c_str());
  return problem.empty();
}

// A built-in model or a Hugging Face folder from its config: the shape checked, the update
// kind and the batch chosen (--batch auto: by trial compiles against both budgets), the module
// built with `init`'s parameters.
bool buildFromConfig(MLIRContext& context, const CompileOptions& o, const HardwareProfile& hw, ParamInit init,
                     LoadedModel& m) {
  const ModelConfig& config = m.config;
  const int64_t seq = o.seq ? o.seq : config.context;
  std::string problem = validateConfig(config, seq);
  if (problem.empty() && o.batch != 0) problem = validateBatch(o.batch, seq);
  if (problem.empty() && o.router_aux_loss && !std::isfinite(*o.router_aux_loss))
    problem = "--router-aux-loss must be a finite coefficient";
  if (problem.empty() && o.router_aux_loss && o.forward_only)
    problem = "--router-aux-loss is a training loss; a --forward-only plan has none (drop it)";
  if (problem.empty() && o.router_aux_loss && !config.experts)
    problem = "--router-aux-loss is the load-balancing loss of a mixture of experts' router; this model has none";
  if (problem.empty() && o.router_aux_loss && *o.router_aux_loss != 0 && config.sigmoid_router)
    problem = "--router-aux-loss: the sigmoid router (GLM-4.5's, DeepSeek-V3's) is balanced by its score bias, and "
              "transformers adds no load-balancing loss for it; the softmax one --router-aux-loss trains would be "
              "another model's (drop it)";
  if (problem.empty() && o.router_aux_loss && *o.router_aux_loss != 0 && config.router_choice_bias)
    problem = "--router-aux-loss: this router chooses with a frozen bias (Ernie 4.5's), which transformers' "
              "load-balancing loss leaves out of the choices it counts; mtc would count the choices made, another "
              "loss (drop it)";
  if (problem.empty() && o.batch == 0 && o.forward_only)
    problem = "--forward-only takes a --batch of its own (the sequences sampled at once; 1 for mtgen's one sample)";
  if (problem.empty() && rowsInPairs(o.loss.objective)) problem = preferenceProblem(o);
  if (problem.empty() && o.batch == 0 && o.device_mem == 0)
    problem = "--batch auto needs --device-mem (or a GPU --hw profile) to size the batch against";
  if (!problem.empty()) {
    std::fprintf(stderr, "mtc: error: %s: %s\n", o.model.c_str(), problem.c_str());
    return false;
  }
  ParamCount params{static_cast<double>(config.numParams())};
  if (o.frozen || o.trainable || o.lora_rank) {
    // What trains, and any problem with the selection, before a batch search (the model itself,
    // where its batch is given).
    m.module = buildModel(context, config, o.batch ? o.batch : batchUnit(o), seq, init, modelForm(o));
    if (!markTrainable(o, m)) return false;
    params = countParams(*m.module);
  }
  m.update = chooseUpdate(o, params, m.update_note);
  if (o.batch != 0 && m.module) return true;
  int64_t batch = o.batch;
  if (batch == 0) {
    const BatchChoice choice = searchBatch(context, config, seq, o, *m.update, hw);
    if (choice.batch == 0) {
      std::fprintf(stderr, "mtc: error: not even batch %lld of %s fits --device-mem %s%s: it needs %s\n",
                   static_cast<long long>(batchUnit(o)), o.model.c_str(), formatBytes(o.device_mem).c_str(),
                   o.host_mem > 0 ? (" and --host-mem " + formatBytes(o.host_mem)).c_str() : "",
                   choice.note.c_str());
      return false;
    }
    batch = choice.batch, m.batch_note = choice.note, m.searched = choice.hints;
  }
  m.module = buildModel(context, config, batch, seq, init, modelForm(o));
  return markTrainable(o, m);
}

bool loadHuggingFace(MLIRContext& context, const CompileOptions& o, const HardwareProfile& hw, LoadedModel& m) {
  if (!m.hf) m.hf = readHuggingFaceFolder(o.model, o.no_weights);  // --lora-from read it already
  const ModelConfig& v = o.overrides;
  if (v.layers || v.width || v.heads || v.kv_heads || v.ffn || v.vocab || v.experts || v.experts_per_token ||
      v.expert_ffn || o.tied) {
    std::fprintf(stderr, "mtc: error: %s is a pretrained model: its shape is its config's (drop --layers, --width, "
                 "--heads, --kv-heads, --ffn, --vocab, --experts, --experts-per-token, --expert-ffn, --tied/--untied; "
                 "--context may shorten it)\n", o.model.c_str());
    return false;
  }
  const bool reward = o.loss.objective == LossObjective::kReward;
  if (m.hf->config.hasScoreHead() && !reward) {
    std::fprintf(stderr, "mtc: error: %s is a reward model (%s: one score per sequence, no LM head): compile it with "
                 "--objective reward\n", o.model.c_str(), m.hf->architecture.c_str());
    return false;
  }
  m.config = m.hf->config;
  if (reward && !m.config.hasScoreHead()) m.config.score_head = ModelConfig::ScoreHead::kNew;
  CompileOptions named = o;  // --frozen / --trainable match the folder's tensor names too
  for (const auto& [ours, source] : m.hf->weights) named.param_source_names[ours] = source.place.name;
  if (!o.frozen_fp32)
    for (const std::string& ours : bf16Params(*m.hf))
      if (!o.lora_from_replaced.count(ours)) named.bf16_params.insert(ours);
  if (v.context) m.config.context = std::min(m.config.context, v.context);
  if (o.router_aux_loss) m.config.router_aux_loss_coef = *o.router_aux_loss;
  m.description = fmt::format("{} ({})", o.model, describeShape("Hugging Face " + m.hf->architecture, m.config));
  return buildFromConfig(context, named, hw, ParamInit::kWeightsFile, m);
}

bool loadPreset(MLIRContext& context, const CompileOptions& o, const HardwareProfile& hw, LoadedModel& m) {
  const ModelPreset* preset = findModelPreset(o.model);
  struct stat st {};
  const bool exists = stat(o.model.c_str(), &st) == 0;
  if (!preset && (exists || o.model.find('/') != std::string::npos)) {
    // A path, not a preset's name: say what is wrong with the path.
    std::fprintf(stderr, "mtc: error: %s %s\n", o.model.c_str(),
                 !exists ? "does not exist"
                 : S_ISDIR(st.st_mode)
                     ? "is a folder without config.json: a Hugging Face model folder holds config.json and its weights"
                     : "is neither a .mlir nor an .onnx file");
    return false;
  }
  if (!preset) {
    std::string known;
    for (const auto& p : modelPresets()) known += " " + p.name;
    std::fprintf(stderr,
                 "mtc: error: '%s' is not a .mlir or .onnx file, a Hugging Face folder (with config.json) or a built-in "
                 "model (built-in:%s)\n",
                 o.model.c_str(), known.c_str());
    return false;
  }
  ModelConfig& config = m.config;
  config = preset->config;
  const ModelConfig& v = o.overrides;
  for (auto [field, value] :
       {std::pair{&config.layers, v.layers}, {&config.width, v.width}, {&config.heads, v.heads},
        {&config.kv_heads, v.kv_heads}, {&config.ffn, v.ffn}, {&config.vocab, v.vocab},
        {&config.context, v.context}, {&config.experts, v.experts}, {&config.experts_per_token, v.experts_per_token},
        {&config.expert_ffn, v.expert_ffn}})
    if (value) *field = value;
  // Another layer count repeats the preset's pattern of sliding layers (gpt-oss's every other one).
  if (v.layers && !preset->config.sliding_layers.empty()) {
    const auto& pattern = preset->config.sliding_layers;
    config.sliding_layers.clear();
    for (int64_t l = 0; l < config.layers; ++l)
      if (std::find(pattern.begin(), pattern.end(), l % preset->config.layers) != pattern.end())
        config.sliding_layers.push_back(l);
  }
  if (v.heads && !v.kv_heads && config.family == ModelFamily::kGpt2) config.kv_heads = config.heads;
  if (o.tied) config.tied = *o.tied;
  if (o.router_aux_loss) config.router_aux_loss_coef = *o.router_aux_loss;
  if (o.loss.objective == LossObjective::kReward) config.score_head = ModelConfig::ScoreHead::kNew;
  m.description = fmt::format("{} ({})", o.model, describeShape(familyName(config.family), config));
  return buildFromConfig(context, o, hw, ParamInit::kSeeded, m);
}

}  // namespace

// The model `o.model` names, by its kind: an ONNX file, a Hugging Face folder, mt IR, a preset.
bool loadModel(MLIRContext& context, llvm::SourceMgr& sources, const CompileOptions& o, const HardwareProfile& hw,
               LoadedModel& m) {
  auto endsWith = [&](const std::string& suffix) {
    return o.model.size() > suffix.size() && o.model.compare(o.model.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  const bool from_config = !endsWith(".onnx") && !endsWith(".mlir");
  if (o.router_aux_loss && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --router-aux-loss is for a mixture of experts built from a preset or a "
                 "Hugging Face folder\n", o.model.c_str());
    return false;
  }
  if (o.kv_cache && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --kv-cache builds the decode step of a built-in model or a Hugging Face "
                 "folder (its attention is known); for this model use --forward-only alone (mtgen then recomputes "
                 "the window for each token)\n", o.model.c_str());
    return false;
  }
  if (o.loss.objective == LossObjective::kReward && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --objective reward puts a score head on a built-in model or a Hugging Face "
                 "folder (an imported graph computes its own logits)\n", o.model.c_str());
    return false;
  }
  if (o.packed_examples && !from_config) {
    std::fprintf(stderr, "mtc: error: %s: --packed-examples builds the attention of a built-in model or a Hugging "
                 "Face folder (an imported graph computes its own); train this model with mtrun --rows examples (one "
                 "example per row) instead\n", o.model.c_str());
    return false;
  }
  if (o.lora_rank && endsWith(".onnx")) {
    std::fprintf(stderr, "mtc: error: %s: --lora adapts a built-in model, a Hugging Face folder or mt IR; an ONNX "
                 "import keeps what does not train as constants (--frozen, --trainable train part of it)\n",
                 o.model.c_str());
    return false;
  }
  if (endsWith(".onnx")) return importOnnx(context, o, m);
  if (isHuggingFaceFolder(o.model)) return loadHuggingFace(context, o, hw, m);
  if (from_config) return loadPreset(context, o, hw, m);
  m.module = parseSourceFile<ModuleOp>(o.model, sources, ParserConfig(&context));
  if (!m.module) {
    std::fprintf(stderr, "mtc: error: cannot parse %s (see the diagnostics above)\n", o.model.c_str());
    return false;
  }
  m.description = o.model;
  return markTrainable(o, m);
}

// --forward-only: the model function's one result, its logits, becomes the output "logits" (an
// ONNX evaluation import and a .mlir function with outputs are forward-only already).
bool markForwardOnly(ModuleOp module, const std::string& model) {
  func::FuncOp func = getModelFunction(module);
  if (!func) return false;
  if (isForwardOnly(func)) return true;
  if (func.getNumResults() != 1 || func.getResultAttr(0, kLossAttr)) {
    std::fprintf(stderr, "mtc: error: %s: --forward-only needs a model function returning its logits alone\n",
                 model.c_str());
    return false;
  }
  func.setResultAttr(0, kOutputAttr, StringAttr::get(module.getContext(), "logits"));
  return true;
}
}  // namespace mt
