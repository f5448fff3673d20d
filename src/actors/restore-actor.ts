import { createActor, type Actor, type AnyStateMachine, type InspectionEvent } from 'xstate'

/**
 * An actor from a persisted snapshot, constructed but not started. XState's typings ask for an
 * `input` when the machine takes one; a restored actor's input is inside its snapshot.
 */
export function restoreActor<M extends AnyStateMachine>(
  machine: M,
  snapshot: unknown,
  inspect?: (event: InspectionEvent) => void,
): Actor<M> {
  return createActor(machine, { snapshot, inspect } as unknown as Parameters<
    typeof createActor<M>
  >[1])
}
