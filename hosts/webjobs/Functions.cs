using System.Reflection;
using System.Reflection.Emit;
using Azure.Storage.Queues;
using Azure.Storage.Queues.Models;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Extensions.DurableTask;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace RouteLock.WebJobsHost;

/// <summary>
/// What each generated WebJobs function calls: the trigger's value as the Functions host would send it
/// to the Node worker, the worker's answer converted back the way the host converts it.
/// </summary>
public static class Bridge
{
    public static Worker? Worker;
    public static Func<string, QueueClient>? Queue;
    public static readonly Dictionary<string, JsFunction> Functions = new(StringComparer.OrdinalIgnoreCase);

    static JObject Text(string? value) => new() { ["string"] = value };

    public static object? Orchestrator(string name, string context, string? client) =>
        Worker.FromTypedData(Run(name, Text(context), client)["returnValue"]);

    public static object? Activity(string name, string input, string? client) =>
        Worker.FromTypedData(Run(name, Text(input), client)["returnValue"]);

    public static void Timer(string name, TimerInfo timer, string? client)
    {
        var value = new JObject
        {
            ["Schedule"] = new JObject { ["AdjustForDST"] = true },
            ["ScheduleStatus"] = timer.ScheduleStatus == null ? null : JObject.FromObject(timer.ScheduleStatus),
            ["IsPastDue"] = timer.IsPastDue,
        };
        Run(name, new JObject { ["json"] = value.ToString(Formatting.None) }, client);
    }

    /// <summary>A queue message: JSON text as json, anything else as a string, with the host's trigger metadata.</summary>
    public static void QueueMessage(string name, QueueMessage message, string? client)
    {
        string body = message.Body.ToString();
        var data = LooksLikeJson(body) ? new JObject { ["json"] = body } : Text(body);
        var metadata = new JObject
        {
            ["Id"] = Text(message.MessageId),
            ["DequeueCount"] = new JObject { ["int"] = message.DequeueCount },
            ["PopReceipt"] = Text(message.PopReceipt),
            ["InsertionTime"] = Text(message.InsertedOn?.ToString("o")),
            ["ExpirationTime"] = Text(message.ExpiresOn?.ToString("o")),
            ["NextVisibleTime"] = Text(message.NextVisibleOn?.ToString("o")),
        };
        Run(name, data, client, metadata);
    }

    static bool LooksLikeJson(string body)
    {
        string t = body.TrimStart();
        if (!(t.StartsWith('{') || t.StartsWith('['))) return false;
        try { JToken.Parse(body); return true; } catch (JsonException) { return false; }
    }

    static JObject Run(string name, JObject data, string? client, JObject? metadata = null)
    {
        var fn = Functions[name];
        var answer = Worker!.Invoke(Worker.Invocation(fn, data, client, metadata));
        WriteQueueOutputs(fn, answer);
        return answer;
    }

    /// <summary>Storage queue output bindings (the poison outputs): the extension's default base64 encoding.</summary>
    public static void WriteQueueOutputs(JsFunction fn, JObject answer)
    {
        foreach (var output in (answer["outputData"] as JArray ?? []).Cast<JObject>())
        {
            var binding = fn.Binding((string)output["name"]!);
            if ((string?)binding?["type"] != "queue") continue;
            var client = Queue!((string)binding!["queueName"]!);
            client.CreateIfNotExists();
            var value = Worker.FromTypedData(output["data"]);
            var messages = value is JArray many ? many.Select(m => m.Type == JTokenType.String ? (string)m! : m.ToString(Formatting.None)) : [value is JToken t ? t.ToString(Formatting.None) : Convert.ToString(value) ?? ""];
            foreach (var m in messages) client.SendMessage(m);
        }
    }
}

/// <summary>
/// One generated static method per JS function, with the trigger attribute the Functions host would bind:
/// `[OrchestrationTrigger] string` (the out-of-proc JSON protocol), `[ActivityTrigger] string`,
/// `[EntityTrigger] string`, `[QueueTrigger] QueueMessage`, `[TimerTrigger] TimerInfo`, plus a
/// `[DurableClient] string` when the function declares a Durable client input. HTTP functions get none:
/// the front door serves them.
/// </summary>
public static class FunctionEmitter
{
    record Shape(Type Parameter, Type Returns, string Target, Func<JsFunction, CustomAttributeBuilder> Attribute);

    static CustomAttributeBuilder Plain<T>() => new(typeof(T).GetConstructor(Type.EmptyTypes)!, []);

    static readonly Dictionary<string, Shape> Shapes = new(StringComparer.OrdinalIgnoreCase)
    {
        ["orchestrationTrigger"] = new(typeof(string), typeof(object), nameof(Bridge.Orchestrator), _ => Plain<OrchestrationTriggerAttribute>()),
        ["activityTrigger"] = new(typeof(string), typeof(object), nameof(Bridge.Activity), _ => Plain<ActivityTriggerAttribute>()),
        ["entityTrigger"] = new(typeof(string), typeof(object), nameof(Bridge.Activity), _ => Plain<EntityTriggerAttribute>()),
        ["timerTrigger"] = new(typeof(TimerInfo), typeof(void), nameof(Bridge.Timer), fn => new(
            typeof(TimerTriggerAttribute).GetConstructor([typeof(string)])!, [(string)fn.Trigger["schedule"]!],
            [typeof(TimerTriggerAttribute).GetProperty(nameof(TimerTriggerAttribute.RunOnStartup))!,
             typeof(TimerTriggerAttribute).GetProperty(nameof(TimerTriggerAttribute.UseMonitor))!],
            [(bool?)fn.Trigger["runOnStartup"] ?? false, (bool?)fn.Trigger["useMonitor"] ?? true])),
        ["queueTrigger"] = new(typeof(QueueMessage), typeof(void), nameof(Bridge.QueueMessage), fn => new(
            typeof(QueueTriggerAttribute).GetConstructor([typeof(string)])!, [(string)fn.Trigger["queueName"]!],
            [typeof(QueueTriggerAttribute).GetProperty(nameof(QueueTriggerAttribute.Connection))!],
            [(string?)fn.Trigger["connection"] ?? "AzureWebJobsStorage"])),
    };

    public static bool Served(JsFunction fn) => Shapes.ContainsKey(fn.TriggerType);

    public static Type Emit(IEnumerable<JsFunction> functions)
    {
        var assembly = AssemblyBuilder.DefineDynamicAssembly(new AssemblyName("RouteLockFunctions"), AssemblyBuilderAccess.Run);
        var type = assembly.DefineDynamicModule("RouteLockFunctions").DefineType("RouteLockFunctions",
            TypeAttributes.Public | TypeAttributes.Class | TypeAttributes.Abstract | TypeAttributes.Sealed);
        var functionName = typeof(FunctionNameAttribute).GetConstructor([typeof(string)])!;
        foreach (var fn in functions.Where(Served))
        {
            var shape = Shapes[fn.TriggerType];
            bool client = fn.ClientBinding != null;
            Type[] parameters = client ? [shape.Parameter, typeof(string)] : [shape.Parameter];
            var method = type.DefineMethod("Fn_" + fn.Name, MethodAttributes.Public | MethodAttributes.Static, shape.Returns, parameters);
            method.SetCustomAttribute(new CustomAttributeBuilder(functionName, [fn.Name]));
            method.DefineParameter(1, ParameterAttributes.None, "trigger").SetCustomAttribute(shape.Attribute(fn));
            if (client) method.DefineParameter(2, ParameterAttributes.None, "client").SetCustomAttribute(Plain<DurableClientAttribute>());
            var il = method.GetILGenerator();
            il.Emit(OpCodes.Ldstr, fn.Name);
            il.Emit(OpCodes.Ldarg_0);
            if (client) il.Emit(OpCodes.Ldarg_1); else il.Emit(OpCodes.Ldnull);
            il.Emit(OpCodes.Call, typeof(Bridge).GetMethod(shape.Target)!);
            il.Emit(OpCodes.Ret);
        }
        return type.CreateType()!;
    }
}

/// <summary>The Durable client binding's JSON, read once: the HTTP functions get it as the host gives it.</summary>
public static class ClientCapture
{
    public static string? Json;

    [NoAutomaticTrigger]
    public static void Capture([DurableClient] string client) => Json = client;
}
