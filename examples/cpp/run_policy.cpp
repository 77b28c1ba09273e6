// Run an exported ppo_control policy (TorchScript) from C++ with libtorch.
//
//   run_policy <policy.pt> <obs_1> <obs_2> ... <obs_n>   one observation on the command line
//   run_policy <policy.pt> --file <observations.txt>      one observation per line (a batch)
//
// Prints the policy's metadata.json, then one "action: ..." line per observation. The module does
// everything a controller needs: observation normalization, the actor MLP and clipping of the
// action to the bounds. Feed it raw observations exactly as the environment produces them.
#include <torch/script.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  std::exit(2);
}

float parse_float(const std::string& text) {
  try {
    std::size_t used = 0;
    float value = std::stof(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
    return value;
  } catch (const std::exception&) {
    fail("'" + text + "' is not a number");
  }
}

// Every non-empty line of `path` is one observation of space-separated floats.
std::vector<std::vector<float>> read_observations(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open observation file '" + path + "'");
  std::vector<std::vector<float>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<float> row;
    for (std::string word; words >> word;) row.push_back(parse_float(word));
    if (!row.empty()) rows.push_back(std::move(row));
  }
  if (rows.empty()) fail("observation file '" + path + "' holds no numbers");
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " <policy.pt> <obs floats...>\n"
              << "       " << argv[0] << " <policy.pt> --file <observations.txt>\n";
    return 2;
  }
  const std::string policy_path = argv[1];

  std::vector<std::vector<float>> rows;
  if (std::string(argv[2]) == "--file") {
    if (argc != 4) fail("--file takes exactly one path");
    rows = read_observations(argv[3]);
  } else {
    std::vector<float> row;
    for (int i = 2; i < argc; ++i) row.push_back(parse_float(argv[i]));
    rows.push_back(std::move(row));
  }

  // The exporter stores metadata.json next to the code inside the .pt zip archive.
  torch::jit::ExtraFilesMap extra_files{{"metadata.json", ""}};
  try {
    torch::jit::Module policy = torch::jit::load(policy_path, torch::kCPU, extra_files);
    policy.eval();
    std::cout << "metadata: " << extra_files["metadata.json"] << std::endl;

    const int64_t obs_dim = policy.attr("obs_dim").toInt();
    torch::Tensor obs = torch::empty({static_cast<int64_t>(rows.size()), obs_dim}, torch::kFloat32);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      if (static_cast<int64_t>(rows[r].size()) != obs_dim) {
        fail("observation " + std::to_string(r + 1) + " has " + std::to_string(rows[r].size()) +
             " numbers; this policy expects obs_dim=" + std::to_string(obs_dim));
      }
      std::copy(rows[r].begin(), rows[r].end(), obs[r].data_ptr<float>());
    }

    // Inference mode: no autograd bookkeeping, which is what a control loop wants. A real controller
    // would load once and call forward every control tick with a [obs_dim] or [1, obs_dim] tensor.
    c10::InferenceMode guard;
    torch::Tensor action = policy.forward({obs}).toTensor().contiguous();
    const auto actions = action.accessor<float, 2>();
    for (int64_t r = 0; r < actions.size(0); ++r) {
      std::printf("action:");
      for (int64_t j = 0; j < actions.size(1); ++j) std::printf(" %.9g", actions[r][j]);  // 9 digits round-trip a float
      std::printf("\n");
    }
  } catch (const c10::Error& e) {
    fail(std::string("libtorch: ") + e.what_without_backtrace());
  }
  return 0;
}
