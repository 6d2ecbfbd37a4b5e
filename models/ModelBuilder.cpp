// The built-in models' IR (buildModel, models/BuiltinModels.h): the llama and GPT-2 families'
// forward functions built op by op from a ModelConfig, their parameters as function arguments with
// initializers (no weights materialised).
#include <cmath>
#include <functional>

#include "compiler/dialect/MtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "models/BuiltinModels.h"
#include "runtime/plan/plan_format.h"

using namespace mlir;

namespace mt {

namespace {

class ModelBuilder {
 public:
  ModelBuilder(MLIRContext& ctx, const ModelConfig& c, int64_t batch, int64_t seq, ParamInit init, ModelForm form)
      : ctx_(ctx), c_(c), batch_(batch), seq_(seq), init_(init), decode_(form == ModelForm::kDecodeStep),
        packed_(form == ModelForm::kPackedTraining),
        training_(form == ModelForm::kTraining || form == ModelForm::kPackedTraining), b_(&ctx),
        loc_(NameLoc::get(b_.getStringAttr("builtin " + std::string(familyName(c.family)) + " model"))) {}

  // Ops take the module path of the part they belong to ("embed", "blocks.3", "head"): the
  // partition pass finds layer blocks by it, as it does in ONNX node names.
  void enter(const std::string& path) { loc_ = NameLoc::get(b_.getStringAttr(path)); }

  OwningOpRef<ModuleOp> build() {
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc_);
    b_.setInsertionPointToEnd(module->getBody());
    // Built first with no arguments; each param() appends one.
    func_ = b_.create<func::FuncOp>(loc_, "forward", b_.getFunctionType({}, {}));
    Block* body = func_.addEntryBlock();
    b_.setInsertionPointToStart(body);
    const int64_t new_tokens = decode_ ? 1 : seq_;
    tokens_ = input("tokens", RankedTensorType::get({batch_, new_tokens}, b_.getI32Type()));
    if (decode_ || packed_)
      positions_ = input(kPositionsInput, RankedTensorType::get({batch_, new_tokens}, b_.getI32Type()));
    outputs_.insert(outputs_.begin(), {"logits", c_.family == ModelFamily::kGpt2 ? gpt2() : llama()});
    SmallVector<Value> results;
    for (auto& [name, value] : outputs_) results.push_back(value);
    b_.create<func::ReturnOp>(loc_, results);
    func_.setType(b_.getFunctionType(body->getArgumentTypes(), ValueRange(results).getTypes()));
    // A decode step is forward-only by construction: its results are named outputs; otherwise
    // the results after the logits are (the router's statistics).
    for (auto [i, output] : llvm::enumerate(outputs_))
      if (decode_ || i > 0) func_.setResultAttr(i, kOutputAttr, b_.getStringAttr(output.first));
    if (training_ && c_.router_aux_loss_coef > 0 && router_stats_)
      func_.setResultAttr(outputs_.size() - 1, kObjectiveWeightAttr,
                          b_.getF32FloatAttr(static_cast<float>(c_.router_aux_loss_coef)));
    func_->setAttr(kModelAttr, b_.getStringAttr(familyName(c_.family)));
    return module;
  }

 private:
  Value addArgument(Type type, NamedAttribute attr) {
    Block& body = func_.getBody().front();
    Value arg = body.addArgument(type, loc_);
    func_.setType(b_.getFunctionType(body.getArgumentTypes(), {}));
    func_.setArgAttrs(body.getNumArguments() - 1, b_.getDictionaryAttr(attr));
    return arg;
  }

  Value input(const std::string& name, Type type) {
    return addArgument(type, b_.getNamedAttr(kInputAttr, b_.getStringAttr(name)));
  }

  // Self-attention of layer `layer` over q, k, v, q and k first turned by
  // `rotate` (the rotary embedding, or the identity): causal over the sequence, or, in a decode
  // step, over the layer's key/value cache and the new token, whose key and value become outputs.
  // Its window, sinks and softcap where the model has them (gpt-oss, Mistral, Gemma 2).
  Value attention(int64_t layer, Value q, Value k, Value v, const std::function<Value(Value)>& rotate) {
    q = rotate(q), k = rotate(k);
    // A window as long as the sequence (a decode plan's: its cache) changes nothing: none, so the
    // call keeps the fastest kernels (cuDNN's graph and the tensor cores' backward take no window).
    const int64_t window = c_.attentionWindow(layer) < seq_ ? c_.attentionWindow(layer) : 0;
    Value sinks = c_.attention_sinks ? param("layers." + std::to_string(layer) + ".attn.sinks", {c_.heads}, "normal", 0.02)
                                     : Value();
    const APFloat softcap(static_cast<float>(c_.attn_softcap));  // Gemma 2's; 0: none
    if (!decode_)
      return b_.create<AttentionOp>(loc_, q, k, v, sinks, packed_ ? positions_ : Value(), c_.heads, c_.kv_heads, window,
                                    softcap)
          .getResult();
    auto cache = RankedTensorType::get({batch_, seq_, c_.kv_heads * c_.headDim()}, b_.getF32Type());
    const std::string l = std::to_string(layer);
    Value k_cache = input("cache." + l + ".key", cache), v_cache = input("cache." + l + ".value", cache);
    outputs_.push_back({"new." + l + ".key", k});
    outputs_.push_back({"new." + l + ".value", v});
    return b_.create<CachedAttentionOp>(loc_, q, k, v, k_cache, v_cache, positions_, sinks, c_.heads, c_.kv_heads, window,
                                        softcap)
        .getResult();
  }

  // init: "normal" (with std), "zeros" or "ones".
  // `fresh`: new to a pretrained model (a reward model's score head): seeded even from a weights file.
  // `frozen`: a parameter that never trains (a buffer in PyTorch).
  Value param(const std::string& name, ArrayRef<int64_t> shape, StringRef init, double std = 0.0, bool fresh = false,
              bool frozen = false) {
    if (init_ == ParamInit::kWeightsFile && !fresh) init = "weights";
    SmallVector<NamedAttribute> fields = {b_.getNamedAttr("name", b_.getStringAttr(name)),
                                          b_.getNamedAttr("init", b_.getStringAttr(init))};
    if (init == "normal") fields.push_back(b_.getNamedAttr("std", b_.getF32FloatAttr(std)));
    if (frozen) fields.push_back(b_.getNamedAttr(kParamFrozenKey, b_.getUnitAttr()));
    return addArgument(RankedTensorType::get(shape, b_.getF32Type()),
                       b_.getNamedAttr(kParamAttr, b_.getDictionaryAttr(fields)));
  }

  // x times `factor` in f32, or x where the factor is 1.
  Value scaled(Value x, double factor) {
    return factor == 1.0 ? x : b_.create<ScaleOp>(loc_, x, b_.getF32FloatAttr(static_cast<float>(factor))).getResult();
  }

  // What q is scaled by so that the kernels' head_dim^-1/2 gives the model's scores: Granite's
  // attention_multiplier x sqrt(head_dim), Gemma's sqrt(head_dim / query_pre_attn_scalar),
  // DeepSeek's YaRN mscale(factor, mscale_all_dim)^2 (the softmax scale of DeepSeek's own attention,
  // V2's and V3's, and of transformers' DeepseekV3Attention; its DeepseekV2Attention leaves it out),
  // else 1.
  double scoreScaleRatio() const {
    const double head_dim = static_cast<double>(c_.headDim());
    if (c_.attention_multiplier > 0) return c_.attention_multiplier * std::sqrt(head_dim);
    if (c_.query_pre_attn_scalar > 0 && c_.query_pre_attn_scalar != head_dim)
      return std::sqrt(head_dim / c_.query_pre_attn_scalar);
    const RopeScaling& r = c_.rope_scaling;
    if (c_.latentAttention() && r.kind == RopeScaling::Kind::kYarn && r.mscale_all_dim > 0)
      return r.yarnMscale(r.mscale_all_dim) * r.yarnMscale(r.mscale_all_dim);
    return 1.0;
  }

  // The weight the last hidden states multiply: the LM head (the embedding where tied), or a
  // reward model's score head of one output.
  Value outputHead(Value embedding, double std) {
    if (c_.hasScoreHead())
      return param("score.weight", {1, c_.width}, "normal", std,
                   /*fresh=*/c_.score_head == ModelConfig::ScoreHead::kNew);
    return c_.tied ? embedding : param("lm_head.weight", {c_.vocab, c_.width}, "normal", std);
  }

  Value linear(Value x, const std::string& name, int64_t out, int64_t in, bool bias, double std) {
    Value y = b_.create<MatmulOp>(loc_, x, param(name + ".weight", {out, in}, "normal", std), false, true);
    if (bias) y = b_.create<AddOp>(loc_, y, param(name + ".bias", {out}, "zeros"));
    return y;
  }

  Value layerNorm(Value x, const std::string& name) {
    auto ln = b_.create<LayerNormOp>(loc_, x, param(name + ".weight", {c_.width}, "ones"),
                                     param(name + ".bias", {c_.width}, "zeros"),
                                     b_.getF32FloatAttr(static_cast<float>(c_.norm_eps)));
    return ln.getResult();
  }

  // An RMSNorm of `x` over its last `size` by the weight `name`: Gemma's scales by 1 + weight
  // (its weights offsets from 1, zeros at init; the kernel adds the 1 in f32, as transformers'
  // Gemma3RMSNorm does, also where the weight is a bf16 copy).
  Value rmsNormOf(Value x, const std::string& name, int64_t size) {
    Value weight = param(name + ".weight", {size}, c_.norm_plus_one ? "zeros" : "ones");
    return b_.create<RmsNormOp>(loc_, x, weight, b_.getF32FloatAttr(static_cast<float>(c_.norm_eps)),
                                c_.norm_plus_one ? b_.getF32FloatAttr(1.0f) : FloatAttr())
        .getResult();
  }

  Value rmsNorm(Value x, const std::string& name) { return rmsNormOf(x, name, c_.width); }

  // RMSNorm of each head of `x` (batch, seq, heads x head width) over its head width, one weight
  // shared by the heads (Qwen3's q_norm and k_norm): the heads as rows of a view, normalized, and
  // the view back (reshapes: no copy).
  Value headNorm(Value x, const std::string& name) {
    const int64_t heads = cast<RankedTensorType>(x.getType()).getShape().back() / c_.headDim();
    return joinLast(rmsNormOf(splitLast(x, heads), name, c_.headDim()));
  }

  // The tokens' rows of the table, with the padding id's row left out of its gradient.
  Value tokenEmbedding(Value table) {
    return b_.create<EmbeddingOp>(loc_, tokens_, table,
                                  c_.padding_id >= 0 ? b_.getI64IntegerAttr(c_.padding_id) : IntegerAttr());
  }

  Value gpt2() {
    const double std = 0.02, residual_std = 0.02 / std::sqrt(2.0 * c_.layers);
    enter("embed");
    Value wte = param("wte.weight", {c_.vocab, c_.width}, "normal", std);
    Value wpe = param("wpe.weight", {c_.context, c_.width}, "normal", std);
    Value x = tokenEmbedding(wte);
    Value positions = positions_ ? positions_
                              : b_.create<PositionsOp>(loc_, RankedTensorType::get({batch_, seq_}, b_.getI32Type()));
    x = b_.create<AddOp>(loc_, x, b_.create<EmbeddingOp>(loc_, positions, wpe, IntegerAttr()));
    for (int64_t l = 0; l < c_.layers; ++l) {
      const std::string p = "blocks." + std::to_string(l) + ".";
      enter("blocks." + std::to_string(l));
      Value h = layerNorm(x, p + "ln1");
      Value q = linear(h, p + "attn.q", c_.width, c_.width, true, std);
      Value k = linear(h, p + "attn.k", c_.width, c_.width, true, std);
      Value v = linear(h, p + "attn.v", c_.width, c_.width, true, std);
      Value a = attention(l, q, k, v, [](Value x) { return x; });
      x = b_.create<AddOp>(loc_, x, linear(a, p + "attn.proj", c_.width, c_.width, true, residual_std));
      h = layerNorm(x, p + "ln2");
      Value f = b_.create<GeluOp>(loc_, linear(h, p + "mlp.fc", c_.ffn, c_.width, true, std), true);
      x = b_.create<AddOp>(loc_, x, linear(f, p + "mlp.proj", c_.width, c_.ffn, true, residual_std));
    }
    enter("head");
    x = layerNorm(x, "ln_f");
    return b_.create<MatmulOp>(loc_, x, outputHead(wte, std), false, true);
  }

  Value llama() {
    const double std = 0.02, residual_std = 0.02 / std::sqrt(2.0 * c_.layers);
    const int64_t kv_width = c_.kv_heads * c_.headDim(), q_width = c_.heads * c_.headDim();
    enter("embed");
    Value embed = param("embed.weight", {c_.vocab, c_.width}, "normal", std);
    Value x = tokenEmbedding(embed);
    // Gemma's rows times sqrt(width), the factor rounded to f32 as transformers' f32 buffer is.
    if (c_.embed_scaled)
      x = b_.create<ScaleOp>(loc_, x, b_.getF32FloatAttr(static_cast<float>(std::sqrt(static_cast<double>(c_.width)))));
    x = scaled(x, c_.embedding_multiplier);  // Granite's
    if (training_ && c_.moeLayers() > 0) {
      router_stats_ = b_.create<FillOp>(loc_, RankedTensorType::get({2, c_.experts}, b_.getF32Type()),
                                        b_.getF32FloatAttr(0.0f));
      // Which tokens the statistics count: Hugging Face's attention mask (the padding of
      // --rows examples left out; mtrun fills it, all 1 for packed rows).
      token_mask_ = input(kTokenMaskInput, RankedTensorType::get({batch_, seq_}, b_.getF32Type()));
    }
    for (int64_t l = 0; l < c_.layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      enter("layers." + std::to_string(l));
      Value h = c_.input_norms ? rmsNorm(x, p + "attn_norm") : x;
      if (c_.latentAttention()) {
        x = b_.create<AddOp>(loc_, x, latentAttention(l, h, p, std, residual_std));
        x = b_.create<AddOp>(loc_, x, mlpOrExperts(l, rmsNorm(x, p + "mlp_norm"), p, std, residual_std));
        continue;
      }
      Value q = linear(h, p + "attn.q", q_width, c_.width, c_.qkv_bias, std);
      Value k = linear(h, p + "attn.k", kv_width, c_.width, c_.qkv_bias, std);
      Value v = linear(h, p + "attn.v", kv_width, c_.width, c_.qkv_bias, std);
      if (c_.qk_norm && c_.qk_norm_whole)
        q = rmsNormOf(q, p + "attn.q_norm", q_width), k = rmsNormOf(k, p + "attn.k_norm", kv_width);
      else if (c_.qk_norm)
        q = headNorm(q, p + "attn.q_norm"), k = headNorm(k, p + "attn.k_norm");
      // Scores scaled otherwise than by head_dim^-1/2 (Gemma's query_pre_attn_scalar^-1/2,
      // Granite's attention_multiplier): the kernels scale by head_dim^-1/2, so q takes the ratio
      // (the same product, rounded once more).
      q = scaled(q, scoreScaleRatio());
      const int64_t rotary_dim = c_.rotaryDim() == c_.headDim() ? 0 : c_.rotaryDim();
      Value a = attention(l, q, k, v,
                          [&](Value x) { return rotary(l, headPairsTogether(x), c_.headDim(), rotary_dim); });
      a = linear(a, p + "attn.o", c_.width, q_width, c_.o_bias, residual_std);
      if (c_.sandwich_norms) a = rmsNorm(a, p + "attn_post_norm");
      x = b_.create<AddOp>(loc_, x, scaled(a, c_.residual_multiplier));
      h = !c_.input_norms ? x : rmsNorm(x, p + (c_.sandwich_norms ? "mlp_pre_norm" : "mlp_norm"));
      Value m = mlpOrExperts(l, h, p, std, residual_std);
      if (c_.sandwich_norms) m = rmsNorm(m, p + "mlp_post_norm");
      x = b_.create<AddOp>(loc_, x, scaled(m, c_.residual_multiplier));
    }
    enter("head");
    x = rmsNorm(x, "norm");
    // Granite's logits divided by logits_scaling: the hidden states times its inverse before the
    // head (the same logits, rounded once more; the head's matmul stays the loss's input, as the
    // vocabulary split and the token tiles find it). A score head takes the states as they are.
    if (!c_.hasScoreHead()) x = scaled(x, 1.0 / c_.logits_scaling);
    Value logits = b_.create<MatmulOp>(loc_, x, outputHead(embed, std), false, true);
    // Gemma 2's logits capped before the loss (and sampling); a score head's are not.
    if (c_.final_softcap > 0 && !c_.hasScoreHead())
      logits = b_.create<SoftcapOp>(loc_, logits, b_.getF32FloatAttr(static_cast<float>(c_.final_softcap)));
    if (router_stats_) {
      outputs_.push_back({"expert_load", router_stats_});
      // The rows the counts give: the tokens the mask kept, in every MoE layer.
      outputs_.push_back({"router_aux_loss", b_.create<MoeBalanceLossOp>(loc_, router_stats_, batch_ * seq_ * c_.moeLayers(),
                                                                         c_.experts_per_token)});
    }
    return logits;
  }

  // Layer `layer`'s rotary settings: the config's base and scaling, or, in a sliding layer of a
  // model with a local base (Gemma's rope_local_base_freq), that base unscaled.
  struct RopeAttrs {
    FloatAttr theta;
    IntegerAttr scaling_kind;
    DenseF32ArrayAttr scaling_values;  // null without scaling
  };
  RopeAttrs ropeAttrs(int64_t layer) {
    if (c_.rope_local_theta > 0 && c_.attentionWindow(layer) > 0)
      return {b_.getF32FloatAttr(static_cast<float>(c_.rope_local_theta)), b_.getI64IntegerAttr(0), nullptr};
    // Hugging Face's rope_scaling, where the config has one.
    const RopeScalingAttrs scaling = ropeScalingAttrs(c_, seq_, /*by_position=*/static_cast<bool>(positions_));
    return {b_.getF32FloatAttr(static_cast<float>(c_.rope_theta)), b_.getI64IntegerAttr(scaling.kind),
            scaling.kind ? b_.getDenseF32ArrayAttr(scaling.values) : nullptr};
  }

  // x (batch, seq, heads x `head_dim`) turned by layer l's rotary embedding over each head's first
  // `rotary_dim` elements (0: all of them), at the positions given where there are some (a decode
  // step, packed rows); as it is in a NoPE layer.
  Value rotary(int64_t l, Value x, int64_t head_dim, int64_t rotary_dim) {
    if (!c_.rotates(l)) return x;
    const RopeAttrs rope = ropeAttrs(l);
    if (positions_)
      return b_.create<RopeAtOp>(loc_, x, positions_, b_.getI64IntegerAttr(head_dim), rope.theta, rope.scaling_kind,
                                 rope.scaling_values, b_.getBoolAttr(false), b_.getI64IntegerAttr(rotary_dim));
    return b_.create<RopeOp>(loc_, x, b_.getI64IntegerAttr(head_dim), rope.theta, b_.getBoolAttr(false),
                             b_.getI64IntegerAttr(0), rope.scaling_kind, rope.scaling_values,
                             b_.getI64IntegerAttr(rotary_dim));
  }

  Value mlpOrExperts(int64_t l, Value h, const std::string& p, double std, double residual_std) {
    return c_.isMoeLayer(l) ? experts(h, p, std, residual_std) : mlp(h, p + "mlp", c_.ffn, std, residual_std);
  }

  // `x`'s elements [start, start + size) of its last axis, every `step`-th.
  Value lastAxis(Value x, int64_t start, int64_t size, int64_t step = 1) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape()), starts(shape.size(), 0), steps(shape.size(), 1);
    shape.back() = size, starts.back() = start, steps.back() = step;
    return b_.create<SliceOp>(loc_, RankedTensorType::get(shape, type.getElementType()), x,
                              b_.getDenseI64ArrayAttr(starts), b_.getDenseI64ArrayAttr(steps));
  }
  // `x` (..., n x d) as (..., n, d) and back (views: no copy).
  Value splitLast(Value x, int64_t n) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.back() /= n;
    shape.insert(shape.end() - 1, n);
    return b_.create<ReshapeOp>(loc_, RankedTensorType::get(shape, type.getElementType()), x);
  }
  Value joinLast(Value x) {
    auto type = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> shape(type.getShape().drop_back());
    shape.back() *= type.getShape().back();
    return b_.create<ReshapeOp>(loc_, RankedTensorType::get(shape, type.getElementType()), x);
  }
  Value concatLast(Value a, Value b) {
    return b_.create<ConcatOp>(loc_, a, b, cast<RankedTensorType>(a.getType()).getRank() - 1);
  }
  // Interleaved rotary pairs (elements 2i and 2i + 1 of the last axis turned together: DeepSeek's,
  // Ernie 4.5's, GLM-4's) as mt.rope's halves (i and i + d/2): the even elements, then the odd ones. q and k
  // both so permuted, the scores are the same sums.
  Value pairsTogether(Value x) {
    const int64_t d = cast<RankedTensorType>(x.getType()).getShape().back();
    return concatLast(lastAxis(x, 0, d / 2, 2), lastAxis(x, 1, d / 2, 2));
  }
  // x (batch, seq, heads x head_dim) with the pairs of each head's rotated part together
  // (pairsTogether; the rest after it as it is: GLM-4's half) where the config interleaves them
  // (rope_pairs_interleaved); else as it is.
  Value headPairsTogether(Value x) {
    if (!c_.rope_pairs_interleaved) return x;
    const int64_t head_dim = c_.headDim(), rotated = c_.rotaryDim();
    Value heads = splitLast(x, cast<RankedTensorType>(x.getType()).getShape().back() / head_dim);
    if (rotated == head_dim) return joinLast(pairsTogether(heads));
    Value rotated_part = pairsTogether(lastAxis(heads, 0, rotated));
    return joinLast(concatLast(rotated_part, lastAxis(heads, rotated, head_dim - rotated)));
  }

  // DeepSeek's multi-head latent attention (ModelConfig::latentAttention; transformers'
  // DeepseekV3Attention) after the layer's input norm `h` (B, T, width). Each head's q and k are
  // laid out [rotated part, unrotated part] (transformers': the other way round; the scores are the
  // same sums), the rotated part's pairs first brought together (rope_interleave: DeepSeek turns
  // elements 2i and 2i + 1 together, mt.rope i and i + d/2) and turned; every head's k shares one
  // rotated part. The values, v_head_dim wide, are padded with zeros to head_dim for the kernels and
  // the padding dropped from the output.
  Value latentAttention(int64_t l, Value h, const std::string& p, double std, double residual_std) {
    const int64_t heads = c_.heads, nope = c_.qk_nope_dim, rope = c_.qk_rope_dim, dv = c_.v_head_dim;
    const int64_t dqk = nope + rope, latent = c_.kv_lora_rank;
    Value q = c_.q_lora_rank == 0
                  ? linear(h, p + "attn.q", heads * dqk, c_.width, false, std)
                  : linear(rmsNormOf(linear(h, p + "attn.q_a", c_.q_lora_rank, c_.width, false, std), p + "attn.q_a_norm",
                                     c_.q_lora_rank),
                           p + "attn.q_b", heads * dqk, c_.q_lora_rank, false, std);
    Value kv_a = linear(h, p + "attn.kv_a", latent + rope, c_.width, false, std);
    Value kv = splitLast(linear(rmsNormOf(lastAxis(kv_a, 0, latent), p + "attn.kv_a_norm", latent), p + "attn.kv_b",
                                heads * (nope + dv), latent, false, std),
                         heads);  // (B, T, heads, nope + dv)
    auto deepseekPairs = [&](Value x) { return c_.rope_interleave ? pairsTogether(x) : x; };
    Value q_heads = splitLast(q, heads);  // (B, T, heads, dqk), transformers' [unrotated, rotated]
    Value q_rot = splitLast(rotary(l, joinLast(deepseekPairs(lastAxis(q_heads, nope, rope))), rope, 0), heads);
    Value k_rot = rotary(l, deepseekPairs(lastAxis(kv_a, latent, rope)), rope, 0);  // (B, T, rope): one head
    auto type = cast<RankedTensorType>(k_rot.getType());
    const Type element = type.getElementType();
    const int64_t batch = type.getDimSize(0), tokens = type.getDimSize(1);
    Value k_rot_heads =
        b_.create<BroadcastOp>(loc_, RankedTensorType::get({batch, tokens, heads, rope}, element), splitLast(k_rot, 1));
    Value q_all = scaled(joinLast(concatLast(q_rot, lastAxis(q_heads, 0, nope))), scoreScaleRatio());
    Value k_all = joinLast(concatLast(k_rot_heads, lastAxis(kv, 0, nope)));
    Value v = lastAxis(kv, nope, dv);
    if (dv < dqk) {
      SmallVector<int64_t> pad(cast<RankedTensorType>(v.getType()).getShape());
      pad.back() = dqk - dv;
      v = concatLast(v, b_.create<FillOp>(loc_, RankedTensorType::get(pad, element), b_.getF32FloatAttr(0.0f)));
    }
    Value a = attention(l, q_all, k_all, joinLast(v), [](Value x) { return x; });
    a = joinLast(lastAxis(splitLast(a, heads), 0, dv));
    return linear(a, p + "attn.o", c_.width, heads * dv, false, residual_std);
  }

  // A gated MLP of width `ffn` under `module` (a llama layer's dense "layers.3.mlp", Qwen2-MoE's
  // shared expert "layers.3.moe.shared"): SwiGLU, or Gemma's GeGLU (GELU's tanh form of the gate).
  Value mlp(Value h, const std::string& module, int64_t ffn, double std, double residual_std) {
    Value gate = linear(h, module + ".gate", ffn, c_.width, false, std);
    Value up = linear(h, module + ".up", ffn, c_.width, false, std);
    Value s = c_.gate_activation == ModelConfig::GateActivation::kGeluTanh
                  ? b_.create<MulOp>(loc_, b_.create<GeluOp>(loc_, gate, true), up).getResult()
                  : b_.create<SwigluOp>(loc_, gate, up).getResult();
    return linear(s, module + ".down", c_.width, ffn, false, residual_std);
  }

  // A mixture of SwiGLU experts in its place: the router's top k per token, each token's rows
  // grouped by expert, the experts' products over their row ranges, the outputs weighed back.
  // Expert weights are stacked (experts, out, in), each a torch Linear's.
  Value experts(Value h, const std::string& p, double std, double residual_std) {
    const int64_t e = c_.experts, f = c_.expert_ffn, d = c_.width;
    const bool oss = c_.expert_form == ModelConfig::ExpertForm::kGptOss;
    // Qwen2-MoE's shared expert before the router, in its block's order (LoRA's dropout sites
    // follow the products' order, as PEFT's layers draw them).
    Value shared = c_.shared_expert_ffn ? mlp(h, p + "moe.shared", c_.shared_expert_ffn, std, residual_std) : Value();
    Value logits = linear(h, p + "moe.router", e, d, oss, std);
    // The router's choice bias (transformers' e_score_correction_bias, a buffer or frozen): frozen.
    Value score_bias =
        c_.routerScoreBias() ? param(p + "moe.router.score_bias", {e}, "zeros", 0.0, false, true) : Value();
    auto route = b_.create<MoeRouteOp>(loc_, logits, score_bias, routing(), c_.experts_per_token, c_.router_groups,
                                       c_.router_groups_chosen, APFloat(static_cast<float>(c_.routed_scaling)));
    if (router_stats_)
      router_stats_ = b_.create<MoeBalanceStatsOp>(loc_, logits, route.getExperts(), router_stats_, token_mask_);
    auto dispatch = b_.create<MoeDispatchOp>(loc_, h, route.getExperts(), e);
    auto product = [&](Value x, const std::string& name, int64_t out, int64_t in, double sd) -> Value {
      return b_.create<GroupedMatmulOp>(loc_, x, param(p + "moe." + name + ".weight", {e, out, in}, "normal", sd),
                                        dispatch.getCounts(), Value(), true, 0);
    };
    if (oss) {
      Value s = b_.create<ClampedSwigluOp>(loc_, ossProduct(dispatch, dispatch.getRouted(), p + "moe.gate_up", d, 2 * f, std),
                                           b_.getF32FloatAttr(1.702f),
                                           b_.getF32FloatAttr(static_cast<float>(c_.swiglu_limit)));
      return b_.create<MoeCombineOp>(loc_, ossProduct(dispatch, s, p + "moe.down", f, d, residual_std),
                                     dispatch.getPositions(), route.getWeights());
    }
    // gate's product before up's, in the function's order (an argument list's order is the
    // compiler's; LoRA's dropout sites follow the products' order, as the PyTorch twins draw them).
    Value gate = product(dispatch.getRouted(), "gate", f, d, std);
    Value up = product(dispatch.getRouted(), "up", f, d, std);
    Value s = b_.create<SwigluOp>(loc_, gate, up);
    Value routed = b_.create<MoeCombineOp>(loc_, product(s, "down", d, f, residual_std), dispatch.getPositions(),
                                           route.getWeights());
    if (!shared) return routed;
    if (!c_.shared_expert_gated) return b_.create<AddOp>(loc_, routed, shared);
    // The shared expert's output times sigmoid(h . shared_gate) (B, T, 1), broadcast over the width.
    Value opening = b_.create<UnaryOp>(loc_, linear(h, p + "moe.shared_gate", 1, d, false, std), b_.getStringAttr("sigmoid"));
    return b_.create<AddOp>(loc_, routed, b_.create<BinaryOp>(loc_, opening, shared, b_.getStringAttr("mul")));
  }

  MoeRouting routing() const {
    if (c_.expert_form == ModelConfig::ExpertForm::kGptOss) return MoeRouting::TopKSoftmax;
    if (c_.sigmoid_router) return c_.normalize_topk ? MoeRouting::SigmoidTopKNormalized : MoeRouting::SigmoidTopK;
    return c_.normalize_topk ? MoeRouting::SoftmaxTopKNormalized : MoeRouting::SoftmaxTopK;
  }

  // gpt-oss's expert product over the routed rows x (R, in): weight (E, in, out) as Hugging Face
  // stores it (x @ weight[e]), then each expert's bias (E, out).
  Value ossProduct(MoeDispatchOp dispatch, Value x, const std::string& name, int64_t in, int64_t out, double sd) {
    const int64_t e = c_.experts;
    Value y = b_.create<GroupedMatmulOp>(loc_, x, param(name + ".weight", {e, in, out}, "normal", sd),
                                         dispatch.getCounts(), Value(), false, 0);
    return b_.create<GroupedAddBiasOp>(loc_, y, param(name + ".bias", {e, out}, "zeros"), dispatch.getCounts());
  }


  MLIRContext& ctx_;
  const ModelConfig& c_;
  int64_t batch_, seq_;
  ParamInit init_;
  bool decode_;
  bool packed_;         // kPackedTraining: positions_ is each token's in its example
  bool training_;       // kTraining or kPackedTraining: a mixture of experts returns its router's statistics too
  Value router_stats_;  // training a mixture of experts: the statistics of the MoE layers so far
  Value token_mask_;    // and the tokens they count (B, T)
  OpBuilder b_;
  Location loc_;
  func::FuncOp func_;
  Value tokens_, positions_;  // positions_: a decode step's or packed examples' input, else null
  // After the logits: a decode step's new keys/values, or the router's statistics (kTraining).
  std::vector<std::pair<std::string, Value>> outputs_;
};

}  // namespace

OwningOpRef<ModuleOp> buildModel(MLIRContext& context, const ModelConfig& config, int64_t batch, int64_t seq,
                                 ParamInit init, ModelForm form) {
  context.getOrLoadDialect<MtDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
  return ModelBuilder(context, config, batch, seq, init, form).build();
}

}  // namespace mt
