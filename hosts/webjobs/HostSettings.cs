using System.Text.RegularExpressions;
using Newtonsoft.Json.Linq;

namespace RouteLock.WebJobsHost;

/// <summary>A setting the host cannot start with; the launcher prints <see cref="Code"/> and the message.</summary>
public sealed class SettingsException(string message) : Exception(message)
{
    public string Code => "HOST_SETTING_INVALID";
}

/// <summary>
/// Everything the host reads from its environment and host.json, checked before anything starts. host.json's
/// `extensions` section becomes `AzureWebJobs:Extensions:…` configuration, the same keys the
/// `AzureWebJobs__Extensions__…` variables set, so the extensions bind their options from it as the
/// Functions host makes them do. `AzureFunctionsJobHost__extensions__…` variables, the Functions host's
/// overrides of host.json that Azure's app settings carry, override it here too.
/// </summary>
public sealed record HostSettings(
    Uri WorkerUrl,
    string Secret,
    int Port,
    string Storage,
    IReadOnlyDictionary<string, string?> Configuration,
    bool QueuePollingSet,
    bool DurablePollingSet)
{
    static readonly Regex AppSetting = new("%([^%]+)%");
    static readonly Regex JobHostOverride = new("^AzureFunctionsJobHost(?:__|:)extensions(?:__|:)(.+)$", RegexOptions.IgnoreCase);
    const string StorageProvider = "AzureWebJobs:Extensions:durableTask:storageProvider";

    /// <summary>
    /// What Azure deploys for the Azure Storage provider (infra/bicep/main.bicep, azureStorageDurableSettings),
    /// so a local stop holds a migration as long as one in Azure: the messages a stopped host had dequeued
    /// stay hidden this long (5 min by the extension's default).
    /// </summary>
    static readonly (string Key, string Value)[] AzureDefaults =
    [
        ($"{StorageProvider}:controlQueueVisibilityTimeout", "00:01:00"),
        ($"{StorageProvider}:workItemQueueVisibilityTimeout", "00:01:00"),
    ];
    static readonly Regex HubName = new("^[A-Za-z][A-Za-z0-9]{2,49}$");

    /// <summary>
    /// Read and check every setting. <paramref name="names"/>: the environment's variable names, for its
    /// `AzureFunctionsJobHost__extensions__…` overrides. <paramref name="beforeStart"/>: the launcher's check
    /// before it starts Azurite and the worker, so their addresses are not asked for yet.
    /// </summary>
    public static HostSettings Load(Func<string, string?> env, IEnumerable<string> names, bool beforeStart = false)
    {
        string worker = env("ROUTELOCK_WORKER_URL") ?? (beforeStart ? "http://127.0.0.1/" : throw new SettingsException("ROUTELOCK_WORKER_URL is not set"));
        // the launcher's per-run secret: the worker refuses calls without it, the Durable HTTP API too
        string secret = env("ROUTELOCK_HOST_SECRET") ?? (beforeStart ? new string('-', 64) : "");
        if (secret.Length < 32) throw new SettingsException("ROUTELOCK_HOST_SECRET is not set");
        string storage = env("AzureWebJobsStorage") ?? (beforeStart ? "-" : "");
        if (storage.Length == 0) throw new SettingsException("AzureWebJobsStorage is not set");
        string portText = env("PORT") ?? "7071";
        if (!int.TryParse(portText, out int port) || port is < 1 or > 65535)
            throw new SettingsException($"PORT={portText} is not a port number");
        if (!Free(port)) throw new SettingsException($"PORT={port} is in use on 127.0.0.1");
        string path = env("ROUTELOCK_HOST_JSON") ?? "host.json";
        JObject hostJson;
        try { hostJson = JObject.Parse(File.ReadAllText(path)); }
        catch (Exception e) { throw new SettingsException($"{path}: {e.Message}"); }
        var extensions = hostJson["extensions"] as JObject ?? new JObject();
        var config = new Dictionary<string, string?>(StringComparer.OrdinalIgnoreCase);
        Flatten(extensions, "AzureWebJobs:Extensions", config, env);
        Override(config, env, names);
        // the defaults stand only where neither host.json nor an override says, and only for Azure Storage
        if (!config.ContainsKey($"{StorageProvider}:type"))
            foreach (var (key, value) in AzureDefaults) config.TryAdd(key, value);
        CheckDurable(config);
        CheckQueues(config);
        return new HostSettings(new Uri(worker), secret, port, storage, config,
            config.ContainsKey("AzureWebJobs:Extensions:queues:maxPollingInterval"),
            config.ContainsKey("AzureWebJobs:Extensions:durableTask:storageProvider:maxQueuePollingInterval"));
    }

    static bool Free(int port)
    {
        var probe = new System.Net.Sockets.TcpListener(System.Net.IPAddress.Loopback, port);
        try { probe.Start(); return true; }
        catch (System.Net.Sockets.SocketException) { return false; }
        finally { probe.Stop(); }
    }

    /// <summary>Nested objects become `:`-joined keys; `%NAME%` is read from the environment, as the host does.</summary>
    static void Flatten(JToken token, string prefix, Dictionary<string, string?> into, Func<string, string?> env)
    {
        switch (token)
        {
            case JObject obj:
                foreach (var (key, value) in obj) Flatten(value!, $"{prefix}:{key}", into, env);
                break;
            case JArray array:
                for (int i = 0; i < array.Count; i++) Flatten(array[i], $"{prefix}:{i}", into, env);
                break;
            default:
                string raw = token.Type == JTokenType.Boolean ? token.ToString().ToLowerInvariant() : token.ToString();
                into[prefix] = AppSetting.Replace(raw, m =>
                    env(m.Groups[1].Value) ?? throw new SettingsException($"{prefix} names the app setting {m.Groups[1].Value}, which is not set"));
                break;
        }
    }

    /// <summary>`AzureFunctionsJobHost__extensions__a__b` sets `AzureWebJobs:Extensions:a:b`, over host.json.</summary>
    static void Override(Dictionary<string, string?> config, Func<string, string?> env, IEnumerable<string> names)
    {
        foreach (string name in names)
        {
            var match = JobHostOverride.Match(name);
            if (match.Success) config[$"AzureWebJobs:Extensions:{match.Groups[1].Value.Replace("__", ":")}"] = env(name);
        }
    }

    static void CheckDurable(Dictionary<string, string?> config)
    {
        if (config.TryGetValue("AzureWebJobs:Extensions:durableTask:hubName", out var hub) && !HubName.IsMatch(hub ?? ""))
            throw new SettingsException($"extensions.durableTask.hubName '{hub}' is not a task hub name (3–50 letters and digits, a letter first)");
        foreach (var (key, value) in config)
            if (key.EndsWith("Interval", StringComparison.OrdinalIgnoreCase) && key.Contains(":durableTask:", StringComparison.OrdinalIgnoreCase) && !TimeSpan.TryParse(value, out _))
                throw new SettingsException($"{key} '{value}' is not a time span (hh:mm:ss)");
        // the extension refuses these only once it starts, after Azurite and the worker
        foreach (var (key, value) in config)
        {
            if (!key.StartsWith(StorageProvider + ":", StringComparison.OrdinalIgnoreCase) || !key.EndsWith("VisibilityTimeout", StringComparison.OrdinalIgnoreCase)) continue;
            bool control = key.EndsWith(":controlQueueVisibilityTimeout", StringComparison.OrdinalIgnoreCase);
            if (!TimeSpan.TryParse(value, out var t) || t <= TimeSpan.Zero || (control && (t < TimeSpan.FromMinutes(1) || t > TimeSpan.FromMinutes(60))))
                throw new SettingsException($"{key} '{value}' is not a time span the extension takes ({(control ? "1 to 60 min" : "over 0")}, hh:mm:ss)");
        }
    }

    static void CheckQueues(Dictionary<string, string?> config)
    {
        foreach (var (key, value) in config)
        {
            if (!key.StartsWith("AzureWebJobs:Extensions:queues:", StringComparison.OrdinalIgnoreCase)) continue;
            string name = key[(key.LastIndexOf(':') + 1)..];
            bool ok = name.ToLowerInvariant() switch
            {
                "visibilitytimeout" or "maxpollinginterval" => TimeSpan.TryParse(value, out var t) && t >= TimeSpan.Zero,
                "maxdequeuecount" or "batchsize" or "newbatchthreshold" => int.TryParse(value, out int n) && n > 0,
                _ => true,
            };
            if (!ok) throw new SettingsException($"extensions.queues.{name} '{value}' is not valid");
        }
    }
}
