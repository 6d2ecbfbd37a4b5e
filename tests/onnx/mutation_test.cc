// The ONNX importer under mutated models: structural mutations of real models (dimensions,
// attributes, op types, inputs, tensor data and types) and byte flips of their files. Every
// mutant is imported (as a model to train and as a forward-only one); an import either
// succeeds — and then its plan must compile and pass the runtime's verifier, and a forward-only
// plan must run — or fails with ImportError, never a crash.
//
//   onnx_mutation [--mutants N] [--seed S] [MODEL.onnx...]   (these, and node-test models)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/io/error.h"
#include "tests/onnx/import_attempt.h"

namespace fs = std::filesystem;
using namespace mt;
using namespace mt::onnximport;

namespace {

constexpr char kNodeTests[] = "/usr/share/libonnx-testdata/data/node/";
const char* const kDefaultModels[] = {
    "test_layer_normalization_4d_axis1", "test_gemm_all_attributes", "test_sce_NCd1d2d3_sum_weight_high_ii",
    "test_slice_neg_steps", "test_reshape_negative_extended_dims", "test_gather_2d_indices",
    "test_softmax_axis_1", "test_split_variable_parts_2d", "test_tril_neg", "test_where_long_example",
    "test_reduce_sum_keepdims_random", "test_matmul_4d", "test_expand_dim_changed", "test_concat_3d_axis_1",
    "test_unsqueeze_two_axes", "test_pow_bcast_array"};

struct Tally {
  int tried = 0, imported = 0, refused = 0, ran = 0;
};

// tests/onnx/import_attempt.h's attempt, counted.
void attempt(const std::string& path, bool training, Tally& tally) {
  ++tally.tried;
  const test::Attempt result = test::attemptImport(path, training);
  tally.refused += result == test::Attempt::kRefused;
  tally.imported += result != test::Attempt::kRefused;
  tally.ran += result == test::Attempt::kRan;
}

// A graph output listed twice: it made a forward-only import whose plan the verifier refused
// (issue 18 #12). Kept as a regression input: the first mutant of every model.
void listAnOutputTwice(onnx::ModelProto& m) {
  auto* g = m.mutable_graph();
  if (g->output_size()) *g->add_output() = g->output(0);
}

void mutateStructure(onnx::ModelProto& m, std::mt19937_64& rng) {
  auto* g = m.mutable_graph();
  auto pick = [&](int n) { return static_cast<int>(rng() % std::max(n, 1)); };
  const int64_t wild[] = {-3, -1, 0, 1, 2, 3, 7, 1000, int64_t{1} << 40, INT64_MAX, INT64_MIN};
  switch (rng() % 9) {
    case 0:  // a graph input's dimension
      if (g->input_size()) {
        auto* shape = g->mutable_input(pick(g->input_size()))->mutable_type()->mutable_tensor_type()->mutable_shape();
        if (shape->dim_size()) shape->mutable_dim(pick(shape->dim_size()))->set_dim_value(wild[pick(11)]);
      }
      break;
    case 1:  // an int attribute or ints entry
      if (g->node_size()) {
        auto* n = g->mutable_node(pick(g->node_size()));
        if (n->attribute_size()) {
          auto* a = n->mutable_attribute(pick(n->attribute_size()));
          a->set_i(wild[pick(11)]);
          if (a->ints_size()) a->set_ints(pick(a->ints_size()), wild[pick(11)]);
          a->set_f(static_cast<float>(wild[pick(11)]));
        }
      }
      break;
    case 2: {  // the op type
      static const char* ops[] = {"Add", "MatMul", "Reshape", "Gather", "Slice", "Concat", "Softmax", "Where",
                                  "LayerNormalization", "Split", "Transpose", "Expand", "Trilu", "ReduceSum",
                                  "SoftmaxCrossEntropyLoss", "Gemm", "Squeeze", "Unsqueeze", "Cast", "Einsum"};
      if (g->node_size()) g->mutable_node(pick(g->node_size()))->set_op_type(ops[pick(20)]);
      break;
    }
    case 3:  // an input dropped or renamed
      if (g->node_size()) {
        auto* n = g->mutable_node(pick(g->node_size()));
        if (n->input_size()) {
          if (rng() % 2) n->mutable_input()->RemoveLast();
          else n->set_input(pick(n->input_size()), rng() % 2 ? "" : "nowhere");
        }
      }
      break;
    case 4:  // an input wired to another value
      if (g->node_size() > 1) {
        auto* n = g->mutable_node(pick(g->node_size()));
        const auto& other = g->node(pick(g->node_size()));
        if (n->input_size() && other.output_size()) n->set_input(pick(n->input_size()), other.output(0));
      }
      break;
    case 5:  // an initializer's dims or data type
      if (g->initializer_size()) {
        auto* t = g->mutable_initializer(pick(g->initializer_size()));
        if (t->dims_size() && rng() % 2) t->set_dims(pick(t->dims_size()), wild[pick(11)]);
        else t->set_data_type(static_cast<int32_t>(rng() % 17));
      }
      break;
    case 6:  // an initializer's raw data cut or int values made wild
      if (g->initializer_size()) {
        auto* t = g->mutable_initializer(pick(g->initializer_size()));
        if (t->has_raw_data() && !t->raw_data().empty()) t->mutable_raw_data()->resize(rng() % t->raw_data().size());
        for (int i = 0; i < t->int64_data_size(); ++i) t->set_int64_data(i, wild[pick(11)]);
      }
      break;
    case 7:  // the graph input's element type
      if (g->input_size())
        g->mutable_input(pick(g->input_size()))->mutable_type()->mutable_tensor_type()->set_elem_type(
            static_cast<int32_t>(rng() % 17));
      break;
    default:  // the opset
      if (m.opset_import_size()) m.mutable_opset_import(0)->set_version(static_cast<int64_t>(rng() % 20));
      break;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int mutants = 400;
  uint64_t seed = 2026;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--mutants" && i + 1 < argc) mutants = std::atoi(argv[++i]);
    else if (std::string(argv[i]) == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else models.push_back(argv[i]);
  }
  for (const char* name : kDefaultModels) models.push_back(std::string(kNodeTests) + name + "/model.onnx");
  const std::string path = (fs::temp_directory_path() / ("onnx_mutant_" + std::to_string(::getpid()) + ".onnx")).string();
  std::mt19937_64 rng(seed);
  Tally tally;
  for (const std::string& original_path : models) {
    onnx::ModelProto original;
    try {
      original = readModel(original_path);
    } catch (const ImportError& e) {
      std::fprintf(stderr, "onnx_mutation: %s\n", e.what());
      return 2;
    }
    std::string bytes;
    original.SerializeToString(&bytes);
    for (int i = 0; i < mutants; ++i) {
      std::string mutant;
      if (i % 4 == 3) {  // byte flips of the file
        mutant = bytes;
        for (int f = 1 + static_cast<int>(rng() % 4); f > 0; --f) mutant[rng() % mutant.size()] = static_cast<char>(rng());
      } else {
        onnx::ModelProto m = original;
        if (i == 0) listAnOutputTwice(m);
        else for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) mutateStructure(m, rng);
        m.SerializeToString(&mutant);
      }
      std::ofstream(path, std::ios::binary | std::ios::trunc) << mutant;
      for (bool training : {false, true}) {
        try {
          attempt(path, training, tally);
        } catch (const Error& e) {
          // Only the runtime's own checks of a compiled plan throw mt::Error here.
          std::fprintf(stderr, "onnx_mutation: mutant %d of %s compiled into a plan the runtime refuses: %s\n", i,
                       original_path.c_str(), e.what());
          fs::copy_file(path, "onnx_mutation_failure.onnx", fs::copy_options::overwrite_existing);
          return 1;
        }
      }
    }
  }
  fs::remove(path);
  std::printf("onnx_mutation: %d imports of mutated models from %zu originals: %d imported (%d run), %d refused "
              "with ImportError, no crash\n",
              tally.tried, models.size(), tally.imported, tally.ran, tally.refused);
  return 0;
}
