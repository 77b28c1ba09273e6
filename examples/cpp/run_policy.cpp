// Run an exported ppo_control policy (TorchScript) from C++ with libtorch.
//
//   run_policy <policy.pt> <obs_1> <obs_2> ... <obs_n>   one observation on the command line
//   run_policy <policy.pt> --file <observations.txt>      one observation per line (a batch)
//   run_policy <policy.pt> --episode <observations.txt>   one control step per line (an episode)
//
// Prints the policy's metadata.json and its contract (observation size, history, recurrent state
// size, control period, action names), then one "action: ..." line per observation. The module does everything a
// controller needs: observation normalization, the actor MLP and bringing the action into the
// bounds (clipped, or squashed with tanh: metadata "action_squash"). Feed it raw observations exactly as the environment produces them.
//
// A policy trained with observation history (history > 1) or a recurrent layer (recurrent state >
// 0) is stateful: the module keeps its previous observations and its recurrent state itself, and
// reset() must be called at every episode start. --episode
// steps one robot through a file of consecutive observations, calling reset() before the first
// and at every line that reads `reset` (the next episode starts there). --file and the command
// line evaluate a batch of robots at a single control step: each row is its robot's first step.
#include <torch/script.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  std::exit(2);
}

float parse_float(const std::string& text, const std::string& where) {
  try {
    std::size_t used = 0;
    float value = std::stof(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
    return value;
  } catch (const std::exception&) {
    fail(where + ": '" + text + "' is not a number");
  }
}

// One non-empty line of an observation file: an observation, or (--episode only) an episode start.
struct Line {
  std::string where;  // "line <n> of '<path>'", for error messages
  bool reset = false;
  std::vector<float> values;
};

// Every non-empty line of `path` is one observation of space-separated floats; with
// `allow_reset`, a line holding only the word `reset` marks the start of the next episode.
std::vector<Line> read_lines(const std::string& path, bool allow_reset) {
  std::ifstream in(path);
  if (!in) fail("cannot open observation file '" + path + "'");
  std::vector<Line> lines;
  bool any_observation = false;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    Line line;
    line.where = "line " + std::to_string(number) + " of '" + path + "'";
    std::istringstream words(text);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    if (tokens.empty()) continue;
    if (tokens.size() == 1 && tokens[0] == "reset") {
      if (!allow_reset) fail(line.where + ": 'reset' separates episodes, which only --episode reads");
      line.reset = true;
    } else {
      for (const std::string& token : tokens) line.values.push_back(parse_float(token, line.where));
      any_observation = true;
    }
    lines.push_back(std::move(line));
  }
  if (!any_observation) fail("observation file '" + path + "' holds no numbers");
  return lines;
}

// Every observation must have obs_dim numbers; checked before the first step, so a bad line
// stops the run before any action is printed.
void check_sizes(const std::vector<Line>& lines, int64_t obs_dim) {
  for (const Line& line : lines) {
    if (!line.reset && static_cast<int64_t>(line.values.size()) != obs_dim) {
      fail(line.where + " has " + std::to_string(line.values.size()) + " numbers; this policy expects obs_dim=" +
           std::to_string(obs_dim));
    }
  }
}

// The observation of `line` as a float32 tensor [obs_dim].
torch::Tensor observation(const Line& line) {
  torch::Tensor obs = torch::empty({static_cast<int64_t>(line.values.size())}, torch::kFloat32);
  std::copy(line.values.begin(), line.values.end(), obs.data_ptr<float>());
  return obs;
}

void print_action(const torch::Tensor& action) {  // action: [action_dim] float32
  const auto values = action.accessor<float, 1>();
  std::printf("action:");
  for (int64_t j = 0; j < values.size(0); ++j) std::printf(" %.9g", values[j]);  // 9 digits round-trip a float
  std::printf("\n");
}

// --- the few metadata.json values shown as the contract -----------------------------------------
// No JSON library: the exporter writes flat top-level keys ("key": value), so a search for the
// quoted key followed by a colon finds them. A real controller would use its own JSON parser.

// Position just after `"key":` (and any spaces) in `json`, or npos.
std::size_t value_start(const std::string& json, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  for (std::size_t at = json.find(quoted); at != std::string::npos; at = json.find(quoted, at + 1)) {
    std::size_t pos = json.find_first_not_of(" \t\r\n", at + quoted.size());
    if (pos != std::string::npos && json[pos] == ':') return json.find_first_not_of(" \t\r\n", pos + 1);
  }
  return std::string::npos;
}

// The number under `key` as written (e.g. "0.008"), or nothing when absent or null.
std::optional<std::string> json_number(const std::string& json, const std::string& key) {
  const std::size_t start = value_start(json, key);
  if (start == std::string::npos) return std::nullopt;
  const std::size_t end = json.find_first_of(",}] \t\r\n", start);
  const std::string token = json.substr(start, end == std::string::npos ? std::string::npos : end - start);
  char* used = nullptr;
  std::strtod(token.c_str(), &used);
  if (token.empty() || used != token.c_str() + token.size()) return std::nullopt;  // null, or not a number
  return token;
}

// The list of strings under `key` (e.g. ["thigh_joint", "leg_joint"]), or nothing when absent,
// null or not a plain list of strings. Escapes are undone by keeping the escaped character.
std::optional<std::vector<std::string>> json_strings(const std::string& json, const std::string& key) {
  std::size_t pos = value_start(json, key);
  if (pos == std::string::npos || json[pos] != '[') return std::nullopt;
  std::vector<std::string> items;
  for (pos = json.find_first_not_of(" \t\r\n", pos + 1); pos != std::string::npos && json[pos] != ']';) {
    if (json[pos] != '"') return std::nullopt;
    std::string item;
    for (++pos; pos < json.size() && json[pos] != '"'; ++pos) item += json[pos] == '\\' ? json[++pos] : json[pos];
    if (pos >= json.size()) return std::nullopt;
    items.push_back(std::move(item));
    pos = json.find_first_not_of(" \t\r\n", pos + 1);
    if (pos != std::string::npos && json[pos] == ',') pos = json.find_first_not_of(" \t\r\n", pos + 1);
  }
  if (pos == std::string::npos) return std::nullopt;
  return items;
}

// How many recent observations the policy reads; exports older than history support have no
// `history` attribute (and no state): 1.
int64_t history_of(const torch::jit::Module& policy) {
  return policy.hasattr("history") ? policy.attr("history").toInt() : 1;
}

// Size of a recurrent policy's state (GRU: h, LSTM: h and c); 0 without a recurrent layer, and in
// exports older than recurrent support.
int64_t rnn_state_size_of(const torch::jit::Module& policy) {
  return policy.hasattr("rnn_state_size") ? policy.attr("rnn_state_size").toInt() : 0;
}

void print_contract(const torch::jit::Module& policy, const std::string& metadata) {
  std::cout << "obs_dim: " << policy.attr("obs_dim").toInt() << "\n";
  std::cout << "history: " << history_of(policy) << "\n";
  std::cout << "recurrent state: " << rnn_state_size_of(policy) << "\n";
  const auto period = json_number(metadata, "control_period_s");
  std::cout << "control period: " << (period ? *period + " s" : std::string("unknown")) << "\n";
  std::cout << "actions:";
  if (const auto names = json_strings(metadata, "action_names")) {
    for (const std::string& name : *names) std::cout << " " << name;
  } else {
    std::cout << " " << policy.attr("action_dim").toInt() << " (names not in the metadata)";
  }
  std::cout << std::endl;
}

// Start of an episode: the module forgets its previous observations and recurrent state. Every
// export has reset() (a no-op for a stateless policy); older ones may lack it, and then they have
// no state to forget.
void reset(torch::jit::Module& policy) {
  if (policy.find_method("reset")) policy.run_method("reset");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " <policy.pt> <obs floats...>\n"
              << "       " << argv[0] << " <policy.pt> --file <observations.txt>\n"
              << "       " << argv[0] << " <policy.pt> --episode <observations.txt>\n";
    return 2;
  }
  const std::string policy_path = argv[1];
  const std::string mode = argv[2];

  std::vector<Line> lines;
  if (mode == "--file" || mode == "--episode") {
    if (argc != 4) fail(mode + " takes exactly one path");
    lines = read_lines(argv[3], mode == "--episode");
  } else {
    Line line;
    line.where = "the command line";
    for (int i = 2; i < argc; ++i) line.values.push_back(parse_float(argv[i], line.where));
    lines.push_back(std::move(line));
  }

  // The exporter stores metadata.json next to the code inside the .pt zip archive.
  torch::jit::ExtraFilesMap extra_files{{"metadata.json", ""}};
  try {
    torch::jit::Module policy = torch::jit::load(policy_path, torch::kCPU, extra_files);
    policy.eval();
    std::cout << "metadata: " << extra_files["metadata.json"] << "\n";
    print_contract(policy, extra_files["metadata.json"]);
    const int64_t obs_dim = policy.attr("obs_dim").toInt();
    check_sizes(lines, obs_dim);

    // Inference mode: no autograd bookkeeping, which is what a control loop wants.
    c10::InferenceMode guard;
    if (mode == "--episode") {
      // The control loop of one robot: reset() at the episode start, then forward once per control
      // tick with the [obs_dim] observation; a stateful module remembers the previous ones itself.
      reset(policy);
      for (const Line& line : lines) {
        if (line.reset) {
          reset(policy);
          continue;
        }
        print_action(policy.forward({observation(line)}).toTensor().contiguous());
      }
    } else {
      // A batch of robots at one control step, [batch, obs_dim] in, [batch, action_dim] out. For a
      // stateful module that is every robot's first step, after reset(); its later steps would have
      // to come with the same batch size (one row per robot), which --episode shows for one robot.
      const int64_t history = history_of(policy), rnn_state_size = rnn_state_size_of(policy);
      if (history > 1 || rnn_state_size > 0) {
        std::cout << "note: a stateful policy (history " << history << ", recurrent state " << rnn_state_size
                  << "): the rows are a batch of robots at their first control step; use --episode to step through an episode"
                  << std::endl;
      }
      std::vector<torch::Tensor> rows;
      for (const Line& line : lines) rows.push_back(observation(line));
      reset(policy);
      torch::Tensor action = policy.forward({torch::stack(rows)}).toTensor().contiguous();
      for (int64_t r = 0; r < action.size(0); ++r) print_action(action[r]);
    }
  } catch (const c10::Error& e) {
    fail(std::string("libtorch: ") + e.what_without_backtrace());
  }
  return 0;
}
