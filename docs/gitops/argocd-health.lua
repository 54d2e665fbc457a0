-- Argo CD health check for oasis.dev/EvaluationRun (docs/gitops/argocd.md shows how to install it).
--
-- An EvaluationRun is a gate: it is Healthy only when it finished with a PASS verdict. A FAIL or a
-- PROVIDER_FAILURE (the operator sets Stalled=True for both) is Degraded, and so is an incomplete
-- evaluation (phase Incomplete, Stalled=True: a PASS of what ran, no conformance claim; decision 0105), a run still working is
-- Progressing, a suspended run is Suspended. Status written for an older generation of the spec
-- does not count: until the operator has observed the current spec, the run is Progressing.
local hs = {}

local function condition(status, kind)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function message(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local spec = obj.spec or {}
local status = obj.status
local generation = obj.metadata and obj.metadata.generation

if spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "The evaluation run is suspended"
  return hs
end

if status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to pick up the run"
  return hs
end

if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end

local stalled = condition(status, "Stalled")
local succeeded = condition(status, "Succeeded")
local verdict = status.verdict
local phase = status.phase

if (stalled ~= nil and stalled.status == "True") or verdict == "FAIL" or verdict == "PROVIDER_FAILURE" or phase == "Incomplete" then
  hs.status = "Degraded"
  hs.message = message(stalled, "Verdict " .. tostring(verdict or phase))
  return hs
end

if phase == "Succeeded" and verdict == "PASS" and (succeeded == nil or succeeded.status == "True") then
  hs.status = "Healthy"
  hs.message = message(succeeded, "Verdict PASS")
  return hs
end

-- Finished (a terminal phase, or Completed=True) without a PASS: the gate did not open.
local completed = condition(status, "Completed")
if phase == "Succeeded" or phase == "Failed" or phase == "Cancelled" or (completed ~= nil and completed.status == "True") then
  hs.status = "Degraded"
  hs.message = message(completed, "The evaluation run ended " .. tostring(phase) .. " without a PASS verdict")
  return hs
end

local reconciling = condition(status, "Reconciling")
hs.status = "Progressing"
hs.message = message(reconciling, "Phase " .. tostring(phase or "Pending"))
return hs
