--[[
The advisor's cli_filter: plain sbatch, advised. Installed beside slurm.conf by
`advisor cli-filter install --slurm-conf-dir DIR`, enabled with CliFilterPlugins=cli_filter/lua.

In slurm_cli_pre_submit, for sbatch only (not srun or salloc, not scrontab), sbatch's options go as JSON to
the advisor's helper, which asks the daemon and answers with the option changes ("NAME<TAB>VALUE" lines,
then "#end"). They are applied only if the whole answer is there and every name is one a rewrite may set;
otherwise, and whenever anything fails or takes too long, the job goes to sbatch exactly as written, with
one warning line that says what sbatch does with it (submits it; under --test-only asks Slurm about it and
submits nothing); "applied" is said here, once the changes are set. A job advise-submit submits
(ADVISOR_WRAPPED), a user opts out of (ADVISOR_OFF=1), or a hetjob is left alone. After the submission,
slurm_cli_post_submit tells the daemon the job id.
--]]

-- The helper's command line: this advisor's Python, started bare (python -I -S), or a site's own program.
local HELPER = "@HELPER@"
local TIMEOUT_S = "@TIMEOUT_S@"
local SETTABLE = {
  partition = true, time = true, gres = true, gpus = true, ["gpus-per-node"] = true,
  ["gpus-per-task"] = true, ["gpus-per-socket"] = true, export = true,
}

-- sbatch's own command line, word by word.
local function command_line()
  local file = io.open("/proc/self/cmdline", "rb")
  if file == nil then return {} end
  local cmdline = file:read("*a") or ""
  file:close()
  local words = {}
  for word in cmdline:gmatch("([^%z]*)%z") do
    words[#words + 1] = word
  end
  return words
end

local function program(words)
  return (words[1] or ""):match("([^/]*)$")
end

-- A hetjob's components come one by one (offset 0, 1, ...): a change meant for one job would land on one
-- component, so none is asked about. sbatch splits its command line at every ":" word; a hetjob written
-- in the script (#SBATCH hetjob) the helper sees in the script itself.
local function hetjob(words, offset)
  if offset ~= 0 then return true end
  for index = 2, #words do
    if words[index] == ":" then return true end
  end
  return false
end

-- What sbatch does with the job as the user wrote it (cli_filter.py's _as_written says the same).
local function as_written(options)
  if options["test-only"] == "set" then
    return "asking Slurm about the job as written (sbatch --test-only submits nothing)"
  end
  return "submitting the job as written"
end

local function answer(json)
  local path = os.tmpname()
  local file = assert(io.open(path, "w"))
  file:write(json)
  file:close()
  -- The helper's stderr (the advice, warnings) is the user's; its stdout is the answer.
  local pipe = io.popen("timeout -k 1 " .. TIMEOUT_S .. " " .. HELPER .. " pre " .. path)
  local text = pipe:read("*a") or ""
  pipe:close()
  os.remove(path)
  return text
end

local function advise(options, offset)
  local text = answer(slurm.json_cli_options(options))
  local changes, request, complete = {}, nil, false
  for line in text:gmatch("[^\n]+") do
    if line == "#end" then
      complete = true
    else
      local name, value = line:match("^([%w#%-]+)\t(.*)$")
      if value ~= nil and value:find("%c") then
        error("the advisor's answer is unreadable")
      elseif name == "#request" and value:match("^%x+ [01]$") then
        request = value
      elseif name ~= nil and SETTABLE[name] then
        changes[#changes + 1] = { name, value }
      else
        error("the advisor's answer is unreadable")
      end
    end
  end
  if not complete then
    error("the advisor gave no complete answer")
  end
  local shown = {}
  for _, change in ipairs(changes) do
    options[change[1]] = change[2]
    shown[#shown + 1] = "--" .. change[1] .. "=" .. change[2]
  end
  if request ~= nil then
    slurm.cli_store(offset, request)
  end
  -- Said here, not by the helper: only what was set is "applied".
  if #shown > 0 then
    slurm.log_info("advisor: applied: %s", table.concat(shown, " "))
  end
end

function slurm_cli_setup_defaults(options, early)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
  local words = command_line()
  if program(words) ~= "sbatch" or os.getenv("ADVISOR_WRAPPED") or os.getenv("ADVISOR_OFF") then
    return slurm.SUCCESS
  end
  if hetjob(words, offset) then
    if offset == 0 then
      slurm.log_info("advisor: a heterogeneous job is not advised; %s", as_written(options))
    end
    return slurm.SUCCESS
  end
  local ok, why = pcall(advise, options, offset)
  if not ok then
    slurm.log_info("advisor: warning: %s; %s", tostring(why), as_written(options))
  end
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, jobid, stepid)
  local request = slurm.cli_retrieve(offset)
  if request ~= nil and program(command_line()) == "sbatch" and request:match("^%x+ [01]$") then
    local id, applied = request:match("^(%x+) ([01])$")
    os.execute("timeout -k 1 " .. TIMEOUT_S .. " " .. HELPER .. " post " .. id .. " " ..
      tostring(math.floor(tonumber(jobid))) .. " " .. applied)
  end
  return slurm.SUCCESS
end
